#include "control/jobs/job_runner.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/io.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;

int mode_of(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

// JobRunner's files and rows; no job is started (no backend).
class JobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("edt-job-runner-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    db_ = Database::open((dir_ / "edtd.db").string()).value();
    for (const char* name : {"a", "b"}) {
      Cluster c;
      c.spec.name = name;
      c.spec.framework = "horovod";
      c.owner = "alice";
      ASSERT_TRUE(db_->lock().insert_cluster(c).is_ok());
    }
  }
  void TearDown() override {
    jobs_.reset();
    db_.reset();
    fs::remove_all(dir_);
  }
  void make_runner() { jobs_ = std::make_unique<JobRunner>(db_.get(), nullptr, dir_.string(), std::map<std::string, std::string>{}); }
  // A job's row and the files a job leaves: its log and its exit code.
  static Job job_of(const std::string& cluster) {
    Job job;
    job.cluster = cluster;
    job.container = cluster + "-launcher";
    job.owner = "alice";
    job.command = "true";
    return job;
  }
  Job add_job(const std::string& cluster, bool running) {
    Job job = job_of(cluster);
    job.id = db_->lock().insert_job(job).value();
    if (running) {
      job.process = proc::identify(getpid()).value();  // alive, as its log writer would be
    } else {
      job.state = JobState::kSucceeded;
      job.exit_code = 0;
    }
    EXPECT_TRUE(db_->lock().update_job(job).is_ok());
    EXPECT_TRUE(io::write_file(jobs_dir() / (std::to_string(job.id) + ".log"), "output\n", 0600).is_ok());
    if (!running) {
      EXPECT_TRUE(io::write_file(jobs_dir() / (std::to_string(job.id) + ".exit"), "0\n", 0600).is_ok());
    }
    return job;
  }
  fs::path jobs_dir() const { return dir_ / "jobs"; }
  bool has_files(int64_t id) const { return fs::exists(jobs_dir() / (std::to_string(id) + ".log")); }

  fs::path dir_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<JobRunner> jobs_;
};

// Another host user may not list jobs/ or read a job's output; an earlier
// edtd made them 0755 and 0644.
TEST_F(JobRunnerTest, JobsDirIs0700AndItsFiles0600EvenWhereAnEarlierEdtdMadeThemWider) {
  fs::create_directories(jobs_dir());
  ::chmod(jobs_dir().c_str(), 0755);
  const int64_t id = db_->lock().insert_job(job_of("a")).value();
  const fs::path log = jobs_dir() / (std::to_string(id) + ".log");
  ASSERT_TRUE(io::write_file(log, "secret\n", 0644).is_ok());
  make_runner();
  EXPECT_EQ(mode_of(jobs_dir()), 0700);
  EXPECT_EQ(mode_of(log), 0600);
  for (const auto& entry : fs::directory_iterator(jobs_dir())) EXPECT_EQ(mode_of(entry.path()), 0600) << entry.path();
}

TEST_F(JobRunnerTest, AJobGoesWithItsClusterRowsAndFiles) {
  make_runner();
  const Job of_a = add_job("a", false), of_b = add_job("b", false);
  ASSERT_TRUE(db_->lock().delete_cluster("a").is_ok());
  jobs_->refresh_running();  // what the reconciler's resync calls
  EXPECT_FALSE(has_files(of_a.id));
  EXPECT_FALSE(fs::exists(jobs_dir() / (std::to_string(of_a.id) + ".exit")));
  EXPECT_TRUE(has_files(of_b.id));
  EXPECT_EQ(jobs_->jobs_of("b").size(), 1u);
}

// Jobs an earlier edtd left behind after their cluster (or user) was
// deleted go when edtd starts.
TEST_F(JobRunnerTest, JobsLeftByAnEarlierEdtdGoAtStart) {
  fs::create_directories(jobs_dir());
  const int64_t left = db_->lock().insert_job(job_of("gone")).value();
  ASSERT_TRUE(io::write_file(jobs_dir() / (std::to_string(left) + ".log"), "old\n", 0644).is_ok());
  ASSERT_TRUE(io::write_file(jobs_dir() / "999.log", "no row at all\n", 0644).is_ok());
  make_runner();
  EXPECT_FALSE(db_->lock().job(left).has_value());
  EXPECT_TRUE(fs::is_empty(jobs_dir()));
}

TEST_F(JobRunnerTest, AnEndedJobIsDeletedARunningOneRefused) {
  make_runner();
  const Job running = add_job("a", true), ended = add_job("a", false);
  auto refused = jobs_->remove(running);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(has_files(running.id));
  ASSERT_TRUE(jobs_->remove(ended).is_ok());
  EXPECT_FALSE(db_->lock().job(ended.id).has_value());
  EXPECT_FALSE(has_files(ended.id));
  EXPECT_EQ(jobs_->jobs_of("a").size(), 1u);
}

}  // namespace
}  // namespace edt::control
