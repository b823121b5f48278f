#include "common/io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <thread>

namespace edt::io {
namespace {

TEST(WriteAll, AFullPipeIsWrittenWholeAsTheReaderDrainsIt) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_NONBLOCK), 0);
  std::string data(4 << 20, 'x');
  for (size_t i = 0; i < data.size(); i += 4096) data[i] = static_cast<char>(i / 4096);
  std::string got;
  std::thread reader([&] {
    ::fcntl(fds[0], F_SETFL, 0);
    char buffer[65536];
    for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) got.append(buffer, static_cast<size_t>(n));
  });
  EXPECT_TRUE(write_all(fds[1], data, "the pipe").is_ok());
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  EXPECT_EQ(got, data);
}

TEST(WriteAll, AClosedPeerIsUnavailableNotASignal) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ::close(fds[1]);
  Status status = write_all(fds[0], "hello", "the peer");
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("the peer is gone"), std::string::npos);
  ::close(fds[0]);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ::close(pipe_fds[0]);
  // A pipe raises SIGPIPE on write; edt's programs ignore it, as here.
  ::signal(SIGPIPE, SIG_IGN);
  EXPECT_EQ(write_all(pipe_fds[1], "hello", "the pipe").code(), StatusCode::kUnavailable);
  ::close(pipe_fds[1]);
}

TEST(WriteAll, ADeadlineEndsAWaitForAReaderThatNeverComes) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  std::string data(64 << 20, 'y');
  auto start = Clock::now();
  Status status = write_all(fds[0], data, "the idle peer", start + std::chrono::milliseconds(100));
  EXPECT_EQ(status.code(), StatusCode::kTimeout);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  ::close(fds[0]);
  ::close(fds[1]);
}

// A directory of its own per test, removed with it.
class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/edt-io-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(Files, WrittenFilesReadBackWithTheirMode) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(write_file(path, std::string("a\0b", 3), 0640).is_ok());
  EXPECT_EQ(read_file(path), std::string("a\0b", 3));
  struct stat st{};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(read_file(dir_ + "/missing"), "");
}

TEST_F(Files, AWriteNeverGoesThroughALink) {
  const std::string target = dir_ + "/target", link = dir_ + "/link";
  ASSERT_TRUE(write_file(target, "kept", 0600).is_ok());
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(write_file(link, "replaced", 0600).is_ok());
  EXPECT_EQ(read_file(target), "kept");
}

TEST_F(Files, AReplaceSwapsTheFileWholeAndLeavesNoTemporary) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(replace_file(path, "one", 0644).is_ok());
  struct stat first{}, again{}, second{};
  ASSERT_EQ(::stat(path.c_str(), &first), 0);
  // Unchanged content is not rewritten: the same inode.
  ASSERT_TRUE(replace_file(path, "one", 0644).is_ok());
  ASSERT_EQ(::stat(path.c_str(), &again), 0);
  EXPECT_EQ(again.st_ino, first.st_ino);
  // New content is a new file renamed over the old: a reader holding the
  // old one still reads "one".
  int reader = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(replace_file(path, "two", 0644).is_ok());
  ASSERT_EQ(::stat(path.c_str(), &second), 0);
  EXPECT_NE(second.st_ino, first.st_ino);
  char old[8] = {};
  EXPECT_EQ(::read(reader, old, sizeof old), 3);
  ::close(reader);
  EXPECT_STREQ(old, "one");
  EXPECT_EQ(read_file(path), "two");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace edt::io
