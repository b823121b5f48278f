#include "control/store/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace edt::control {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("edt-store-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    auto store = ControlStore::open((dir_ / "edtd.db").string());
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    store_ = std::move(store).value();
    ASSERT_TRUE(store_->create_user("alice", false).is_ok());
    ASSERT_TRUE(store_->put_image({"edt", "/", {"horovod"}, true}).is_ok());
    std::vector<Gpu> gpus;
    for (int i = 0; i < 4; ++i) gpus.push_back({i, "NVIDIA-P4", true, ""});
    ASSERT_TRUE(store_->set_gpus(gpus).is_ok());
    range_ = AddressRange::parse("127.90.0.0/29").value();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  ClusterSpec spec(const std::string& name, int containers, int gpus = 0) {
    ClusterSpec s;
    s.name = name;
    s.framework = "horovod";
    s.containers = containers;
    if (gpus) s.gpu = {"NVIDIA-P4", gpus};
    return s;
  }
  int free_gpus() { return store_->catalog({"alice", false}).gpus_free["NVIDIA-P4"]; }

  std::filesystem::path dir_;
  std::unique_ptr<ControlStore> store_;
  AddressRange range_;
};

TEST(AddressRangeTest, ParsesAndRefuses) {
  auto r = AddressRange::parse("127.77.0.0/16");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->size, 65536u);
  EXPECT_EQ(r->address(2), "127.77.0.2");
  EXPECT_FALSE(AddressRange::parse("10.0.0.0/8").is_ok());
  EXPECT_FALSE(AddressRange::parse("127.0.0.0/16").is_ok());  // holds 127.0.0.1
  EXPECT_FALSE(AddressRange::parse("127.77.0.0").is_ok());
  EXPECT_FALSE(AddressRange::parse("127.77.0.0/31").is_ok());
}

TEST_F(StoreTest, CreateAllotsAddressesAndGpus) {
  ASSERT_FALSE(store_->create_cluster(spec("a", 2, 1), "alice", range_, 1).has_value());
  auto c = store_->cluster("a");
  ASSERT_TRUE(c.has_value());
  ASSERT_EQ(c->containers.size(), 2u);
  EXPECT_EQ(c->containers[0].name, "a-launcher");
  EXPECT_EQ(c->containers[1].name, "a-worker-0");
  EXPECT_EQ(c->containers[0].address, "127.90.0.1");
  EXPECT_EQ(c->containers[1].address, "127.90.0.2");
  EXPECT_EQ(c->containers[0].gpus, std::vector<int>{0});
  EXPECT_EQ(c->containers[1].gpus, std::vector<int>{1});
  EXPECT_EQ(c->owner, "alice");
  EXPECT_EQ(free_gpus(), 2);
}

TEST_F(StoreTest, RefusalsChangeNothing) {
  ASSERT_FALSE(store_->create_cluster(spec("a", 2, 1), "alice", range_, 1).has_value());
  Refusal taken = store_->create_cluster(spec("a", 2), "alice", range_, 1);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->http_status, 409);
  EXPECT_EQ(taken->field, "name");
  Refusal gpus = store_->create_cluster(spec("b", 3, 1), "alice", range_, 1);
  ASSERT_TRUE(gpus.has_value());
  EXPECT_EQ(gpus->field, "gpu.count");
  EXPECT_NE(gpus->message.find("2 of 4 are free"), std::string::npos) << gpus->message;
  // The /29 has addresses .1 to .6: 2 taken, 4 free; 5 more do not fit.
  Refusal addresses = store_->create_cluster(spec("c", 5), "alice", range_, 1);
  ASSERT_TRUE(addresses.has_value());
  EXPECT_EQ(addresses->http_status, 409);
  EXPECT_EQ(store_->cluster_names(), std::vector<std::string>{"a"});
  EXPECT_EQ(free_gpus(), 2);
  EXPECT_TRUE(store_->containers("c").empty());
}

TEST_F(StoreTest, ScaleUpAllotsAndScaleDownMarksHighestWorkers) {
  ASSERT_FALSE(store_->create_cluster(spec("a", 2, 1), "alice", range_, 1).has_value());
  ASSERT_FALSE(store_->scale_cluster("a", 4, range_).has_value());
  EXPECT_EQ(free_gpus(), 0);
  auto c = store_->cluster("a");
  ASSERT_EQ(c->containers.size(), 4u);
  EXPECT_EQ(c->spec.containers, 4);
  EXPECT_EQ(c->containers[3].name, "a-worker-2");
  Refusal more = store_->scale_cluster("a", 5, range_);
  ASSERT_TRUE(more.has_value());
  EXPECT_EQ(more->field, "gpu.count");
  EXPECT_NE(more->message.find("0 of 4 are free"), std::string::npos);

  ASSERT_FALSE(store_->scale_cluster("a", 2, range_).has_value());
  auto records = store_->containers("a");
  ASSERT_EQ(records.size(), 4u);
  EXPECT_FALSE(records[1].status.leaving);
  EXPECT_TRUE(records[2].status.leaving);
  EXPECT_TRUE(records[3].status.leaving);
  // Growing back before they are gone is refused, not mixed up.
  Refusal early = store_->scale_cluster("a", 3, range_);
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->http_status, 409);
  ASSERT_TRUE(store_->delete_container("a-worker-1").is_ok());
  ASSERT_TRUE(store_->delete_container("a-worker-2").is_ok());
  EXPECT_EQ(free_gpus(), 2);
  EXPECT_FALSE(store_->scale_cluster("a", 3, range_).has_value());
}

TEST_F(StoreTest, DeleteNeedsTheContainersGoneFirst) {
  ASSERT_FALSE(store_->create_cluster(spec("a", 2), "alice", range_, 1).has_value());
  ASSERT_TRUE(store_->add_event("a", "Created", "by alice").is_ok());
  ASSERT_TRUE(store_->mark_deleting("a").is_ok());
  EXPECT_EQ(store_->cluster("a")->phase, "Deleting");
  ASSERT_EQ(store_->events("a").size(), 1u);
  EXPECT_EQ(store_->events("a")[0].type, "Created");
  EXPECT_FALSE(store_->delete_cluster("a").is_ok());
  for (const auto& r : store_->containers("a")) {
    EXPECT_TRUE(r.status.leaving);
    ASSERT_TRUE(store_->delete_container(r.status.name).is_ok());
  }
  ASSERT_TRUE(store_->delete_cluster("a").is_ok());
  EXPECT_FALSE(store_->cluster("a").has_value());
  EXPECT_TRUE(store_->events("a").empty());
  EXPECT_EQ(store_->mark_deleting("a").code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, SurvivesReopenWithEverything) {
  ASSERT_FALSE(store_->create_cluster(spec("a", 2, 1), "alice", range_, 1).has_value());
  auto records = store_->containers("a");
  records[0].sandbox = {4242, 99};
  records[0].status.phase = "Running";
  ASSERT_TRUE(store_->update_container(records[0]).is_ok());
  ASSERT_TRUE(store_->add_token("alice", "hash1").is_ok());
  store_.reset();
  store_ = ControlStore::open((dir_ / "edtd.db").string()).value();
  auto again = store_->containers("a");
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].sandbox.pid, 4242);
  EXPECT_EQ(again[0].sandbox.pid_start, 99u);
  EXPECT_EQ(again[0].status.phase, "Running");
  auto user = store_->user_for_token("hash1");
  ASSERT_TRUE(user.has_value());
  EXPECT_EQ(user->name, "alice");
  EXPECT_FALSE(store_->user_for_token("hash2").has_value());
  EXPECT_EQ(free_gpus(), 2);
}

TEST_F(StoreTest, VolumesAndJobs) {
  ASSERT_TRUE(store_->create_volume({"data", "alice", "/x", true}).is_ok());
  EXPECT_EQ(store_->create_volume({"data", "bob", "/y", true}).code(), StatusCode::kAlreadyExists);
  ClusterSpec s = spec("a", 2);
  s.mounts.push_back({"data", "/root/data", false});
  ASSERT_FALSE(store_->create_cluster(s, "alice", range_, 1).has_value());
  EXPECT_EQ(store_->delete_volume("data").code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_->catalog({"bob", false}).volumes.empty());
  EXPECT_EQ(store_->catalog({"alice", false}).volumes.size(), 1u);

  Job job;
  job.cluster = "a";
  job.container = "a-launcher";
  job.owner = "alice";
  job.command = "hostname";
  auto id = store_->create_job(job);
  ASSERT_TRUE(id.is_ok());
  EXPECT_EQ(store_->jobs_running().size(), 1u);
  Job done = *store_->job(*id);
  done.state = job_state::kSucceeded;
  done.exit_code = 0;
  ASSERT_TRUE(store_->update_job(done).is_ok());
  EXPECT_TRUE(store_->jobs_running().empty());
  EXPECT_EQ(store_->job(*id)->exit_code, 0);
}

}  // namespace
}  // namespace edt::control
