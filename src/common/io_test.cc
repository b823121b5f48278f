#include "common/io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
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

}  // namespace
}  // namespace edt::io
