#include "launcher/process.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include "launcher/test_util.h"

namespace edt::launcher {
namespace {

using namespace edt::launcher::test_util;

TEST(Process, RunsWithTheGivenEnvironmentAndReportsTheExitCode) {
  auto p = Process::spawn({{"sh", "-c", "echo out $FOO; echo err >&2; exit 3"}, {"FOO=bar", "PATH=/usr/bin:/bin"}});
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(read_all(p.value()->stdout_fd()), "out bar\n");
  EXPECT_EQ(read_all(p.value()->stderr_fd()), "err\n");
  ExitStatus status = wait_exit(*p.value());
  EXPECT_EQ(status.code, 3);
  EXPECT_EQ(status.shell_code(), 3);
  EXPECT_EQ(status.describe(), "exited with code 3");
}

TEST(Process, KilledBySignal) {
  auto p = Process::spawn({{"sh", "-c", "kill -KILL $$"}, {"PATH=/usr/bin:/bin"}});
  ASSERT_TRUE(p.is_ok());
  ExitStatus status = wait_exit(*p.value());
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_EQ(status.shell_code(), 128 + SIGKILL);
  EXPECT_NE(status.describe().find("signal 9"), std::string::npos);
}

TEST(Process, MissingCommandIsAnErrorNotAnExitCode) {
  auto p = Process::spawn({{"no-such-command-edt"}, {"PATH=/usr/bin:/bin"}});
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("'no-such-command-edt' not found in PATH (/usr/bin:/bin)"), std::string::npos)
      << p.status().message();
  auto q = Process::spawn({{"/nonexistent/prog"}, {}});
  ASSERT_FALSE(q.is_ok());
  EXPECT_NE(q.status().message().find("/nonexistent/prog"), std::string::npos);
  auto r = Process::spawn({{"/etc/hostname"}, {}});  // exists, not executable
  ASSERT_FALSE(r.is_ok());
}

TEST(Process, SignalGroupReachesChildrenAndLeftoversDie) {
  auto p = Process::spawn({{"sh", "-c", "sleep 100 & echo $!; wait"}, {"PATH=/usr/bin:/bin"}});
  ASSERT_TRUE(p.is_ok());
  char buffer[32] = {};
  pollfd fd{p.value()->stdout_fd(), POLLIN, 0};
  ASSERT_EQ(poll(&fd, 1, 5000), 1);
  ASSERT_GT(read(p.value()->stdout_fd(), buffer, sizeof buffer - 1), 0);
  pid_t sleeper = std::stoi(buffer);
  EXPECT_TRUE(alive(sleeper));
  p.value()->signal_group(SIGTERM);
  ExitStatus status = wait_exit(*p.value());
  EXPECT_EQ(status.signal, SIGTERM);
  EXPECT_TRUE(wait_until_dead(sleeper));
}

TEST(Process, ExitedLeaderTakesItsGroupAlong) {
  // The shell exits at once and leaves a background sleep in its group.
  auto p = Process::spawn({{"sh", "-c", "sleep 100 >/dev/null 2>&1 & echo $!"}, {"PATH=/usr/bin:/bin"}});
  ASSERT_TRUE(p.is_ok());
  pid_t sleeper = std::stoi(read_all(p.value()->stdout_fd()));
  EXPECT_TRUE(wait_exit(*p.value()).success());
  EXPECT_TRUE(wait_until_dead(sleeper));
}

TEST(Process, OwnSessionLeadsASessionAndItsGroupStillStops) {
  // ps prints the child's session and group ids: its own pid for both with
  // own_session (a worker), edtrun's session otherwise (ssh).
  for (bool own : {true, false}) {
    SpawnOptions options{{"sh", "-c", "echo $$ $(ps -o sid=,pgid= -p $$); sleep 100 & wait"}, {"PATH=/usr/bin:/bin"}};
    options.own_session = own;
    auto p = Process::spawn(options);
    ASSERT_TRUE(p.is_ok()) << p.status().to_string();
    char buffer[64] = {};
    pollfd fd{p.value()->stdout_fd(), POLLIN, 0};
    ASSERT_EQ(poll(&fd, 1, 5000), 1);
    ASSERT_GT(read(p.value()->stdout_fd(), buffer, sizeof buffer - 1), 0);
    pid_t pid = 0, sid = 0, pgid = 0;
    ASSERT_EQ(sscanf(buffer, "%d %d %d", &pid, &sid, &pgid), 3) << buffer;
    EXPECT_EQ(pid, p.value()->pid());
    EXPECT_EQ(pgid, pid);
    EXPECT_EQ(sid, own ? pid : getsid(0)) << "own_session " << own;
    p.value()->signal_group(SIGTERM);
    EXPECT_EQ(wait_exit(*p.value()).signal, SIGTERM);
  }
}

}  // namespace
}  // namespace edt::launcher
