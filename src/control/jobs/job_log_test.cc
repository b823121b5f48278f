#include "control/jobs/job_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/io.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A relay over a pipe in a thread, as `edtd job-log` runs over its FIFO.
class JobLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("edt-job-log-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    paths_ = {"", (dir_ / "1.log").string(), (dir_ / "1.code").string(), (dir_ / "1.exit").string()};
    ASSERT_EQ(::pipe2(pipe_, O_CLOEXEC), 0);
    log_fd_ = ::open(paths_.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    ASSERT_GE(log_fd_, 0);
  }
  void TearDown() override {
    close_writer();
    if (relay_.joinable()) relay_.join();
    ::close(log_fd_);
    fs::remove_all(dir_);
  }
  void start(uint64_t limit) {
    writer_ = std::make_unique<JobLogWriter>(log_fd_, limit);
    relay_ = std::thread([this] {
      relay_job_log(pipe_[0], *writer_, paths_);
      ::close(pipe_[0]);
    });
  }
  void write(std::string_view bytes) { ASSERT_TRUE(io::write_all(pipe_[1], bytes, "the relay").is_ok()); }
  void close_writer() {
    if (pipe_[1] >= 0) ::close(pipe_[1]);
    pipe_[1] = -1;
  }
  // The wrapper's exit code, written as it does (a whole file, renamed).
  void exit_with(int code) { ASSERT_TRUE(io::replace_file(paths_.code, std::to_string(code) + "\n", 0600).is_ok()); }
  bool wait_for_exit_file() {
    for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;) {
      if (fs::exists(paths_.exit)) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  fs::path dir_;
  JobLogPaths paths_;
  int pipe_[2] = {-1, -1};
  int log_fd_ = -1;
  std::unique_ptr<JobLogWriter> writer_;
  std::thread relay_;
};

std::string numbered_lines(int first, int count) {
  std::string out;
  for (int i = first; i < first + count; ++i) out += "line " + std::to_string(i) + "\n";
  return out;
}

TEST_F(JobLogTest, ALogPastItsBoundKeepsItsHeadAndItsTailAndSaysWhatWasDropped) {
  constexpr uint64_t kLimit = 64 << 10;
  start(kLimit);
  const std::string output = numbered_lines(0, 200000);  // 2.5 MiB, forty times the bound
  write(output);
  exit_with(3);
  close_writer();
  relay_.join();
  const std::string log = io::read_file(paths_.log);
  EXPECT_LE(log.size(), kLimit + 512);  // the bound and two marker lines
  EXPECT_EQ(log.substr(0, 14), "line 0\nline 1\n");
  EXPECT_TRUE(log.ends_with(numbered_lines(199998, 2))) << log.substr(log.size() - 100);
  EXPECT_NE(log.find("reached its bound of 64 KiB (edtd --job-log-limit)"), std::string::npos);
  const size_t kept_tail = kLimit / 4;
  const std::string dropped = std::to_string(output.size() - (kLimit - kept_tail) - kept_tail);
  EXPECT_NE(log.find("\n[edt: " + dropped + " bytes of this job's output were dropped here; its last " +
                     std::to_string(kept_tail) + " bytes follow]\n"),
            std::string::npos);
  EXPECT_EQ(io::read_file(paths_.exit), "3\n");
  EXPECT_FALSE(fs::exists(paths_.code));
}

TEST_F(JobLogTest, ALogWithinItsBoundIsKeptWhole) {
  start(kMinJobLogLimit);
  write("hello\n");
  exit_with(0);
  close_writer();
  relay_.join();
  EXPECT_EQ(io::read_file(paths_.log), "hello\n");
  EXPECT_EQ(io::read_file(paths_.exit), "0\n");
}

// A process the command left behind holds the FIFO open: the job still
// ends once its command has, with all of the command's output in the log,
// and what the process writes later neither blocks it nor reaches the log.
TEST_F(JobLogTest, TheJobEndsWithItsCommandsOutputWhileAProcessLeftBehindWrites) {
  start(kMinJobLogLimit);
  write("the command's last line\n");
  exit_with(0);
  ASSERT_TRUE(wait_for_exit_file());
  EXPECT_EQ(io::read_file(paths_.log), "the command's last line\n");
  write(std::string(1 << 20, 'x'));  // more than a pipe holds: read and dropped
  close_writer();
  relay_.join();
  EXPECT_EQ(io::read_file(paths_.log), "the command's last line\n");
}

}  // namespace
}  // namespace edt::control
