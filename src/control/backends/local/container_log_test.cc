#include "control/backends/local/container_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/io.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;

class ContainerLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/edt-container-log-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    log_ = ::open((dir_ + "/log").c_str(), O_RDWR | O_CREAT | O_APPEND, 0600);
    rotated_ = ::open((dir_ + "/log.1").c_str(), O_WRONLY | O_CREAT, 0600);
    ready_ = ::open((dir_ + "/ready").c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(log_, 0);
    ASSERT_GE(rotated_, 0);
    ASSERT_GE(ready_, 0);
  }
  void TearDown() override {
    for (int fd : {log_, rotated_, ready_}) ::close(fd);
    fs::remove_all(dir_);
  }
  int64_t size(const char* name) { return static_cast<int64_t>(fs::file_size(dir_ + "/" + name)); }

  std::string dir_;
  int log_ = -1, rotated_ = -1, ready_ = -1;
};

TEST_F(ContainerLogTest, LocalBackendLogStaysUnderItsBoundWhateverIsWritten) {
  constexpr int64_t kBound = 64 * 1024;
  BoundedLog log(log_, rotated_, ready_, kBound);
  const std::string chunk(10000, 'x');
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(log.write(chunk));  // 5 MB
  ASSERT_TRUE(log.write(std::string(3 * kBound, 'y')));          // more than the bound at once
  ASSERT_TRUE(log.write("the last line\n"));
  EXPECT_LE(size("log"), kBound);
  EXPECT_LE(size("log.1"), kBound);
  const std::string now = io::read_file(dir_ + "/log");
  EXPECT_EQ(now.rfind("the last line\n"), now.size() - 14);
  EXPECT_EQ(now.find("edt: this log reached its bound"), 0u) << now.substr(0, 80);
  EXPECT_FALSE(log.ready());
  EXPECT_EQ(size("ready"), 0);
}

TEST_F(ContainerLogTest, LocalBackendLogMarksReadyOnceTheLineIsSeenAcrossChunks) {
  BoundedLog log(log_, rotated_, ready_);
  ASSERT_TRUE(log.write("sshd: starting\nServer list"));
  EXPECT_FALSE(log.ready());
  ASSERT_TRUE(log.write("ening on 127.0.0.1 port 22.\n"));
  EXPECT_TRUE(log.ready());
  EXPECT_EQ(io::read_file(dir_ + "/ready"), "1\n");
  EXPECT_EQ(io::read_file(dir_ + "/log"), "sshd: starting\nServer listening on 127.0.0.1 port 22.\n");
}

TEST_F(ContainerLogTest, LocalBackendLogTailReadsTheEndOnly) {
  BoundedLog log(log_, rotated_, ready_);
  ASSERT_TRUE(log.write(std::string(100000, 'a') + "bwrap: the reason\n"));
  EXPECT_EQ(container_log_tail(dir_, 18), "bwrap: the reason\n");
  EXPECT_EQ(container_log_tail(dir_).size(), 4096u);
  EXPECT_EQ(container_log_tail(dir_ + "/missing"), "");
}

}  // namespace
}  // namespace edt::control
