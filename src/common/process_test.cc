#include "common/process.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace edt::proc {
namespace {

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

}  // namespace
}  // namespace edt::proc
