#include "control/db/database.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace edt::control {
namespace {

class DatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("edt-db-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    reopen();
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  void reopen() {
    db_.reset();
    auto db = Database::open((dir_ / "edtd.db").string());
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    db_ = std::move(db).value();
  }
  // A cluster row with `n` containers at 127.0.0.<index+1>, GPUs as given.
  void add_cluster(const std::string& name, int n, std::vector<std::vector<int>> gpus = {}) {
    auto tx = db_->transaction();
    Cluster c;
    c.spec.name = name;
    c.spec.framework = "horovod";
    c.spec.containers = n;
    c.spec.memory_bytes = (3ull << 30) + 1;  // not a round size: kept exactly
    c.spec.cpu_millis = 1234;  // 1.234 CPUs: kept exactly
    c.owner = "alice";
    ASSERT_TRUE(tx.insert_cluster(c).is_ok());
    for (int i = 0; i < n; ++i) {
      ContainerStatus k;
      k.name = container_name(name, i);
      k.index = i;
      k.address = "127.0." + std::to_string(name[0]) + "." + std::to_string(i + 1);
      if (i < static_cast<int>(gpus.size())) k.gpus = gpus[i];
      ASSERT_TRUE(tx.hold_gpus(k.name, k.gpus).is_ok());
      ASSERT_TRUE(tx.insert_container(name, k).is_ok());
    }
    ASSERT_TRUE(tx.commit().is_ok());
  }

  std::filesystem::path dir_;
  std::unique_ptr<Database> db_;
};

TEST_F(DatabaseTest, AnUncommittedTransactionChangesNothing) {
  {
    auto tx = db_->transaction();
    ASSERT_TRUE(tx.insert_user({"alice", false}).is_ok());
  }
  EXPECT_TRUE(db_->lock().users().empty());
  {
    auto tx = db_->transaction();
    ASSERT_TRUE(tx.insert_user({"alice", false}).is_ok());
    ASSERT_TRUE(tx.commit().is_ok());
  }
  EXPECT_EQ(db_->lock().users().size(), 1u);
  EXPECT_EQ(db_->lock().insert_user({"alice", true}).code(), StatusCode::kAlreadyExists);
}

TEST_F(DatabaseTest, ClustersContainersAndGpuHoldersSurviveReopen) {
  std::vector<Gpu> gpus;
  for (int i = 0; i < 4; ++i) gpus.push_back({i, "P4", true, ""});
  ASSERT_TRUE(db_->lock().set_gpus(gpus).is_ok());
  ASSERT_TRUE(db_->lock().insert_user({"alice", false}).is_ok());
  ASSERT_TRUE(db_->lock().insert_token({0, "alice", "laptop", 1767225600, 0}, "hash1").is_ok());
  ASSERT_TRUE(db_->lock().insert_token({0, "alice", "ci", 1767225600, 1767229200}, "hash3").is_ok());
  EXPECT_EQ(db_->lock().insert_token({0, "nobody", "", 0, 0}, "hash2").status().code(), StatusCode::kNotFound);
  add_cluster("a", 2, {{0}, {1}});
  auto records = db_->lock().containers("a");
  ASSERT_EQ(records.size(), 2u);
  records[0].sandbox = {4242, 99};
  records[0].status.phase = Phase::kRunning;
  ASSERT_TRUE(db_->lock().update_container(records[0]).is_ok());
  records[1].status.phase = Phase::kDraining;
  records[1].draining_since_ms = 1767225600123;
  ASSERT_TRUE(db_->lock().update_container(records[1]).is_ok());
  ASSERT_TRUE(db_->lock().set_scale_failure("a", "scale to 4 failed: x; back to 2").is_ok());
  reopen();
  auto again = db_->lock().containers("a");
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].sandbox, (SandboxRef{4242, 99}));
  EXPECT_EQ(again[0].status.phase, Phase::kRunning);
  EXPECT_EQ(again[1].status.gpus, std::vector<int>{1});
  EXPECT_EQ(again[1].status.phase, Phase::kDraining);
  EXPECT_EQ(again[1].draining_since_ms, 1767225600123);
  EXPECT_EQ(db_->lock().cluster("a")->scale_failure, "scale to 4 failed: x; back to 2");
  EXPECT_EQ(db_->lock().cluster("a")->spec.memory_bytes, (3ull << 30) + 1);
  EXPECT_EQ(db_->lock().cluster("a")->spec.cpu_millis, 1234);
  EXPECT_EQ(db_->lock().user_for_token("hash1", 1767225600)->name, "alice");
  EXPECT_FALSE(db_->lock().user_for_token("hash2", 1767225600).has_value());
  // A token works until its expiry, not at it.
  EXPECT_EQ(db_->lock().user_for_token("hash3", 1767229199)->name, "alice");
  EXPECT_FALSE(db_->lock().user_for_token("hash3", 1767229200).has_value());
  auto tokens = db_->lock().tokens("alice");
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[1].description, "ci");
  EXPECT_EQ(tokens[1].expires_at, 1767229200);
  EXPECT_EQ(db_->lock().delete_token("bob", tokens[1].id).code(), StatusCode::kNotFound);
  ASSERT_TRUE(db_->lock().delete_token("alice", tokens[1].id).is_ok());
  EXPECT_FALSE(db_->lock().user_for_token("hash3", 0).has_value());
  Catalog catalog = db_->lock().catalog(std::nullopt);
  EXPECT_EQ(catalog.gpus_total["P4"], 4);
  EXPECT_EQ(catalog.gpus_free["P4"], 2);
  // A new inventory keeps the holders of GPUs still in it.
  ASSERT_TRUE(db_->lock().set_gpus(gpus).is_ok());
  EXPECT_EQ(db_->lock().gpus()[1].holder, "a-worker-0");
}

TEST_F(DatabaseTest, DeleteNeedsTheContainersGoneFirstAndTakesTheEvents) {
  add_cluster("a", 2, {{0}});
  ASSERT_TRUE(db_->lock().add_event("a", EventType::kCreated, "by alice", 5).is_ok());
  ASSERT_TRUE(db_->lock().mark_deleting("a").is_ok());
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kDeleting);
  ASSERT_EQ(db_->lock().events("a").size(), 1u);
  EXPECT_EQ(db_->lock().events("a")[0].type, EventType::kCreated);
  EXPECT_EQ(db_->lock().delete_cluster("a").code(), StatusCode::kFailedPrecondition);
  const auto records = db_->lock().containers("a");
  for (const auto& r : records) {
    EXPECT_TRUE(r.status.leaving);
    ASSERT_TRUE(db_->lock().delete_container(r.status.name).is_ok());
  }
  ASSERT_TRUE(db_->lock().delete_cluster("a").is_ok());
  EXPECT_FALSE(db_->lock().cluster("a").has_value());
  EXPECT_TRUE(db_->lock().events("a").empty());
  EXPECT_EQ(db_->lock().mark_deleting("a").code(), StatusCode::kNotFound);
}

TEST_F(DatabaseTest, AddressesAreUniqueAcrossClusters) {
  add_cluster("a", 2);
  EXPECT_EQ(db_->lock().addresses(), (std::set<std::string>{"127.0.97.1", "127.0.97.2"}));
  ContainerStatus clash;
  clash.name = "b-launcher";
  clash.address = "127.0.97.1";
  EXPECT_EQ(db_->lock().insert_container("b", clash).code(), StatusCode::kAlreadyExists);
}

TEST_F(DatabaseTest, VolumesAndJobs) {
  ASSERT_TRUE(db_->lock().insert_volume({"data", "alice", "/x", true}).is_ok());
  EXPECT_EQ(db_->lock().insert_volume({"data", "bob", "/y", true}).code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(db_->lock().catalog(std::string("bob")).volumes.empty());
  EXPECT_EQ(db_->lock().catalog(std::string("alice")).volumes.size(), 1u);
  EXPECT_EQ(db_->lock().catalog(std::nullopt).volumes.size(), 1u);
  ASSERT_TRUE(db_->lock().delete_volume("data").is_ok());
  EXPECT_EQ(db_->lock().delete_volume("data").code(), StatusCode::kNotFound);

  Job job;
  job.cluster = "a";
  job.container = "a-launcher";
  job.owner = "alice";
  job.command = "hostname";
  auto id = db_->lock().insert_job(job);
  ASSERT_TRUE(id.is_ok());
  EXPECT_EQ(db_->lock().jobs_running().size(), 1u);
  Job done = *db_->lock().job(*id);
  done.state = JobState::kSucceeded;
  done.exit_code = 0;
  ASSERT_TRUE(db_->lock().update_job(done).is_ok());
  EXPECT_TRUE(db_->lock().jobs_running().empty());
  EXPECT_EQ(db_->lock().job(*id)->state, JobState::kSucceeded);
}

// A job of each of two clusters; returns their ids.
std::pair<int64_t, int64_t> add_jobs(Database& db) {
  Job job;
  job.container = "x";
  job.owner = "alice";
  job.command = "true";
  job.cluster = "a";
  const int64_t of_a = db.lock().insert_job(job).value();
  job.cluster = "b";
  const int64_t of_b = db.lock().insert_job(job).value();
  return {of_a, of_b};
}

TEST_F(DatabaseTest, JobsAreListedDeletedAndGoWithTheirCluster) {
  add_cluster("a", 0);
  add_cluster("b", 0);
  const auto [of_a, of_b] = add_jobs(*db_);
  const int64_t second_of_a = add_jobs(*db_).first;
  ASSERT_EQ(db_->lock().jobs_of("a").size(), 2u);
  EXPECT_EQ(db_->lock().jobs_of("a")[0].id, second_of_a);  // newest first
  EXPECT_EQ(db_->lock().job_ids(), (std::set<int64_t>{of_a, of_b, second_of_a, second_of_a + 1}));

  ASSERT_TRUE(db_->lock().delete_job(second_of_a).is_ok());
  EXPECT_EQ(db_->lock().delete_job(second_of_a).code(), StatusCode::kNotFound);
  ASSERT_TRUE(db_->lock().delete_cluster("a").is_ok());
  EXPECT_FALSE(db_->lock().job(of_a).has_value());
  EXPECT_TRUE(db_->lock().jobs_of("a").empty());
  EXPECT_TRUE(db_->lock().job(of_b).has_value());
}

TEST_F(DatabaseTest, JobsOfClustersDeletedBeforeAreDropped) {
  add_cluster("b", 0);
  const auto [of_a, of_b] = add_jobs(*db_);  // cluster a has no row: an earlier edtd left its jobs
  ASSERT_TRUE(db_->lock().delete_orphan_jobs().is_ok());
  EXPECT_FALSE(db_->lock().job(of_a).has_value());
  EXPECT_TRUE(db_->lock().job(of_b).has_value());
}

// The store holds every tenant's job records and tokens' hashes: the
// database and the files SQLite makes beside it are root's alone, whatever
// the umask, and those an earlier edtd left wider are narrowed.
TEST_F(DatabaseTest, TheStoreAndItsWalAndShmAre0600) {
  db_.reset();
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  const std::string db = (dir_ / "edtd.db").string();
  const mode_t old_umask = ::umask(022);
  reopen();
  ASSERT_TRUE(db_->lock().insert_user({"alice", false}).is_ok());  // the WAL has a frame
  auto mode = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
  };
  for (const char* suffix : {"", "-wal", "-shm"}) EXPECT_EQ(mode(db + suffix), 0600) << db + suffix;
  db_.reset();
  ::chmod(db.c_str(), 0644);
  ::chmod((db + "-wal").c_str(), 0644);
  reopen();
  ::umask(old_umask);
  for (const char* suffix : {"", "-wal", "-shm"}) EXPECT_EQ(mode(db + suffix), 0600) << db + suffix;
}

TEST_F(DatabaseTest, EachUserHasARangeOfItsOwnNeverGivenTwice) {
  auto tx = db_->lock();
  ASSERT_TRUE(tx.insert_user({"alice", false}).is_ok());
  ASSERT_TRUE(tx.insert_user({"bob", false}).is_ok());
  EXPECT_EQ(tx.catalog(std::nullopt).user_ranges, (std::map<std::string, int64_t>{{"alice", 1}, {"bob", 2}}));
  EXPECT_FALSE(tx.insert_user({"bob", true}).is_ok());  // taken: no second range either
  ASSERT_TRUE(tx.delete_user("bob").is_ok());
  ASSERT_TRUE(tx.insert_user({"carol", false}).is_ok());
  ASSERT_TRUE(tx.insert_user({"bob", false}).is_ok());
  // bob's old range 2 is not given again, to carol or to a new bob.
  EXPECT_EQ(tx.catalog(std::nullopt).user_ranges,
            (std::map<std::string, int64_t>{{"alice", 1}, {"bob", 4}, {"carol", 3}}));
}

}  // namespace
}  // namespace edt::control
