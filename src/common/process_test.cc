#include "common/process.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

namespace edt::proc {
namespace {

std::string read_file_for_test(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(ProcessId, ThisProcessIsAliveUnderItsIdentity) {
  auto me = identify(::getpid());
  ASSERT_TRUE(me.has_value());
  EXPECT_GT(me->start_time, 0u);
  EXPECT_TRUE(alive(*me));
  auto stat = read_stat(::getpid());
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->ppid, ::getppid());
}

TEST(ProcessId, AnotherStartTimeIsAnotherProcess) {
  auto me = identify(::getpid());
  ASSERT_TRUE(me.has_value());
  EXPECT_FALSE(alive({me->pid, me->start_time + 1}));
  EXPECT_FALSE(alive({me->pid, 0}));
  EXPECT_FALSE(alive({0, me->start_time}));
  EXPECT_FALSE(identify(-1).has_value());
}

TEST(ProcessId, AZombieIsNotAlive) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  auto id = identify(child);
  // Wait until it has exited but is not yet reaped.
  for (int i = 0; i < 500; ++i) {
    auto stat = read_stat(child);
    if (stat && stat->zombie()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(id.has_value());
  EXPECT_TRUE(read_stat(child)->zombie());
  EXPECT_FALSE(alive(*id));
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(read_stat(child).has_value());
}

TEST(ProcessId, ANamespaceInitIsPidOneBelowUs) {
  EXPECT_TRUE(namespace_init("Name:\tbwrap\nNSpid:\t4242\t1\nNSpgid:\t1\n"));
  EXPECT_FALSE(namespace_init("Name:\tsleep\nNSpid:\t4242\n"));
  EXPECT_FALSE(namespace_init("Name:\tsh\nNSpid:\t4242\t7\n"));
  EXPECT_FALSE(namespace_init("Name:\tinit\nNSpid:\t1\n"));
  EXPECT_FALSE(namespace_init(""));
  EXPECT_FALSE(namespace_init(read_file_for_test("/proc/self/status")));
}

TEST(PinnedProcess, ReadsTheProcessItPinnedAndSeesItExit) {
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(go[1]);
    char byte;
    (void)!::read(go[0], &byte, 1);
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  auto id = identify(child);
  ASSERT_TRUE(id.has_value());
  EXPECT_FALSE(PinnedProcess::open(child, id->start_time + 1).is_ok()) << "another start time is another process";
  auto pinned = PinnedProcess::open(child, id->start_time);
  ASSERT_TRUE(pinned.is_ok()) << pinned.status().message();
  EXPECT_TRUE(pinned->still_alive());
  EXPECT_EQ(parse_stat(pinned->read("stat"))->start_time, id->start_time);
  EXPECT_NE(pinned->read("status").find("\nPid:\t" + std::to_string(child) + "\n"), std::string::npos);
  ::close(go[1]);
  ::waitpid(child, nullptr, 0);
  // Whatever takes the pid next, the pin says its process is gone and
  // reads nothing of another.
  EXPECT_FALSE(pinned->still_alive());
  EXPECT_EQ(pinned->read("stat"), "");
  EXPECT_FALSE(PinnedProcess::open(child, id->start_time).is_ok());
  ::close(go[0]);
}

}  // namespace
}  // namespace edt::proc
