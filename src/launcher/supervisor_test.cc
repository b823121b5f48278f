#include "launcher/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include "launcher/test_util.h"

namespace edt::launcher {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Every byte the supervisor relays, by tag and stream.
class Recorded final : public OutputSink {
 public:
  void write(int tag, Stream stream, std::string_view bytes) override { text[{tag, stream}].append(bytes); }
  void close(int tag, Stream stream) override { ++closes[{tag, stream}]; }
  std::string out(int tag) { return text[{tag, Stream::kStdout}]; }
  std::string err(int tag) { return text[{tag, Stream::kStderr}]; }

  std::map<std::pair<int, Stream>, std::string> text;
  std::map<std::pair<int, Stream>, int> closes;
};

// A directory with a fake `ssh` that runs the remote command here, as
// sshd's login shell would: the supervisor's remote path without a server.
// `before` runs first (a login banner, or an ssh that fails).
class FakeSsh {
 public:
  explicit FakeSsh(const std::string& before = "") {
    char pattern[] = "/tmp/edt-supervisor-XXXXXX";
    dir_ = mkdtemp(pattern);
    std::ofstream(dir_ / "ssh") << "#!/bin/sh\n" << before << "\nfor last; do :; done\nexec /bin/sh -c \"$last\"\n";
    fs::permissions(dir_ / "ssh", fs::perms::owner_all);
  }
  ~FakeSsh() { fs::remove_all(dir_); }
  std::string path() const { return dir_.string() + ":/usr/bin:/bin"; }

 private:
  fs::path dir_;
};

class SupervisorTest : public ::testing::Test {
 protected:
  void make(const std::vector<std::string>& command, milliseconds grace = milliseconds(5000),
            const std::string& path = "/usr/bin:/bin") {
    SupervisorOptions options;
    options.command = command;
    options.cwd = fs::current_path().string();
    options.launcher_env = {{"PATH", path}};
    options.grace_period = grace;
    options.output = &output;
    auto made = Supervisor::create(options);
    ASSERT_TRUE(made.is_ok()) << made.status().to_string();
    supervisor = std::move(made).value();
  }

  pid_t spawn(int tag, bool remote = false, Environment env = {{"PATH", "/usr/bin:/bin"}}) {
    auto pid = supervisor->spawn({tag, "worker " + std::to_string(tag), "host", remote, std::move(env)});
    EXPECT_TRUE(pid.is_ok()) << pid.status().to_string();
    return pid.is_ok() ? pid.value() : -1;
  }

  // Waits until `done` holds (at most 15 s), collecting every event.
  SupervisorEvents wait_until(const std::function<bool(const SupervisorEvents&)>& done) {
    SupervisorEvents all;
    auto end = Clock::now() + std::chrono::seconds(15);
    while (!done(all) && Clock::now() < end) {
      SupervisorEvents e = supervisor->wait(milliseconds(20));
      all.signals.insert(all.signals.end(), e.signals.begin(), e.signals.end());
      all.exits.insert(all.exits.end(), e.exits.begin(), e.exits.end());
    }
    EXPECT_TRUE(done(all)) << "timed out";
    return all;
  }

  SupervisorEvents wait_until_empty() {
    return wait_until([this](const SupervisorEvents&) { return supervisor->empty(); });
  }

  Recorded output;
  std::unique_ptr<Supervisor> supervisor;
};

TEST_F(SupervisorTest, RelaysOutputByTagAndReportsExitCodes) {
  make({"sh", "-c", "echo out $EDT_X; echo err >&2; exit $EDT_X"});
  spawn(3, false, {{"PATH", "/usr/bin:/bin"}, {"EDT_X", "3"}});
  spawn(0, false, {{"PATH", "/usr/bin:/bin"}, {"EDT_X", "0"}});
  EXPECT_EQ(supervisor->running_count(), 2);
  SupervisorEvents events = wait_until_empty();
  ASSERT_EQ(events.exits.size(), 2u);
  for (const auto& exit : events.exits) {
    EXPECT_EQ(exit.status.code, exit.tag);
    EXPECT_TRUE(exit.started);
    EXPECT_FALSE(exit.stopped);
  }
  EXPECT_EQ(output.out(3), "out 3\n");
  EXPECT_EQ(output.err(3), "err\n");
  EXPECT_EQ(output.out(0), "out 0\n");
  EXPECT_EQ((output.closes[{3, Stream::kStdout}]), 1);
  EXPECT_EQ((output.closes[{3, Stream::kStderr}]), 1);
  EXPECT_FALSE(supervisor->contains(3));
}

TEST_F(SupervisorTest, AKilledWorkerReportsItsSignal) {
  make({"sh", "-c", "kill -KILL $$"});
  spawn(1);
  SupervisorEvents events = wait_until_empty();
  ASSERT_EQ(events.exits.size(), 1u);
  EXPECT_EQ(events.exits[0].status.signal, SIGKILL);
  EXPECT_EQ(events.exits[0].status.shell_code(), 128 + SIGKILL);
}

TEST_F(SupervisorTest, AMissingCommandIsNotFound) {
  make({"no-such-command-edt"});
  auto pid = supervisor->spawn({0, "worker 0", "host", false, {{"PATH", "/usr/bin:/bin"}}});
  ASSERT_FALSE(pid.is_ok());
  EXPECT_EQ(pid.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(supervisor->empty());
}

TEST_F(SupervisorTest, StopEscalatesToSigkillForAWorkerThatIgnoresSigterm) {
  make({"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}, milliseconds(300));
  spawn(0);
  wait_until([this](const SupervisorEvents&) { return output.out(0) == "ready\n"; });
  auto asked = Clock::now();
  supervisor->stop(0);
  EXPECT_TRUE(supervisor->stopping(0));
  SupervisorEvents events = wait_until_empty();
  ASSERT_EQ(events.exits.size(), 1u);
  EXPECT_EQ(events.exits[0].status.signal, SIGKILL);
  EXPECT_TRUE(events.exits[0].stopped);
  EXPECT_GE(Clock::now() - asked, milliseconds(300));
}

TEST_F(SupervisorTest, ADelayedStopWaitsThenSendsSigterm) {
  make({"sleep", "30"});
  spawn(0);
  auto asked = Clock::now();
  supervisor->stop(0, milliseconds(300));
  supervisor->stop(0);  // already being stopped: no change
  SupervisorEvents events = wait_until_empty();
  ASSERT_EQ(events.exits.size(), 1u);
  EXPECT_EQ(events.exits[0].status.signal, SIGTERM);
  EXPECT_GE(Clock::now() - asked, milliseconds(300));
}

TEST_F(SupervisorTest, KillAllKillsAtOnce) {
  make({"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}, milliseconds(60000));
  spawn(0);
  spawn(1);
  wait_until([this](const SupervisorEvents&) { return output.out(0) == "ready\n" && output.out(1) == "ready\n"; });
  supervisor->stop_all();
  supervisor->kill_all();
  SupervisorEvents events = wait_until_empty();
  ASSERT_EQ(events.exits.size(), 2u);
  for (const auto& exit : events.exits) EXPECT_EQ(exit.status.signal, SIGKILL);
}

TEST_F(SupervisorTest, SignalsToEdtrunAreEvents) {
  make({"true"});
  kill(getpid(), SIGHUP);
  kill(getpid(), SIGCHLD);  // children are reaped, not reported
  SupervisorEvents events = wait_until([](const SupervisorEvents& e) { return !e.signals.empty(); });
  EXPECT_EQ(events.signals, std::vector<int>{SIGHUP});
}

TEST_F(SupervisorTest, OutputHeldByADescendantIsDrainedForABoundedTime) {
  // The descendant is in its own session (so not stopped with the worker's
  // group) before the worker exits.
  make({"sh", "-c",
        "f=$(mktemp); setsid sh -c \"echo \\$\\$; echo >$f; exec sleep 30\" &"
        " while [ ! -s $f ]; do sleep 0.01; done; rm -f $f"});
  spawn(0);
  auto started = Clock::now();
  SupervisorEvents events = wait_until_empty();
  EXPECT_EQ(events.exits.size(), 1u);
  EXPECT_GE(Clock::now() - started, Supervisor::kDrainTime - milliseconds(100));
  pid_t sleeper = std::stoi(output.out(0));
  EXPECT_TRUE(test_util::alive(sleeper));
  kill(sleeper, SIGKILL);
}

TEST_F(SupervisorTest, ARemoteWorkerStartsAtTheMarkerWhichIsNotOutput) {
  FakeSsh ssh("echo banner; echo from-ssh >&2");
  make({"sh", "-c", "echo out $EDT_X; echo err >&2"}, milliseconds(5000), ssh.path());
  spawn(0, true, {{"EDT_X", "remote"}});
  SupervisorEvents events = wait_until_empty();
  ASSERT_EQ(events.exits.size(), 1u);
  EXPECT_TRUE(events.exits[0].started);
  EXPECT_EQ(events.exits[0].status.code, 0);
  EXPECT_EQ(events.exits[0].early_stderr, "");
  EXPECT_EQ(output.out(0), "banner\nout remote\n");
  EXPECT_EQ(output.err(0), "from-ssh\nerr\n");  // held until the marker, then relayed
}

TEST_F(SupervisorTest, ARemoteWorkerIsStoppedThroughItsWrapper) {
  FakeSsh ssh;
  make({"sh", "-c", "echo ready; exec sleep 30"}, milliseconds(5000), ssh.path());
  spawn(0, true);
  wait_until([this](const SupervisorEvents&) { return output.out(0) == "ready\n"; });
  EXPECT_TRUE(supervisor->started(0));
  supervisor->stop(0);  // closes its stdin: the wrapper sends SIGTERM
  SupervisorEvents events = wait_until_empty();
  ASSERT_EQ(events.exits.size(), 1u);
  EXPECT_EQ(events.exits[0].status.code, 128 + SIGTERM);
  EXPECT_TRUE(events.exits[0].stopped);
}

TEST_F(SupervisorTest, OutputBeforeTheMarkerIsBounded) {
  // An ssh that never reaches the host: much output, then code 255.
  FakeSsh ssh("head -c 200000 /dev/zero | tr '\\0' e >&2; head -c 100000 /dev/zero | tr '\\0' o; exit 255");
  make({"true"}, milliseconds(5000), ssh.path());
  spawn(0, true);
  SupervisorEvents events = wait_until_empty();
  ASSERT_EQ(events.exits.size(), 1u);
  const WorkerExit& exit = events.exits[0];
  EXPECT_FALSE(exit.started);
  EXPECT_EQ(exit.status.code, 255);
  EXPECT_EQ(exit.early_stderr, std::string(Supervisor::kEarlyOutputLimit, 'e'));
  EXPECT_EQ(output.err(0), "");                         // held for the driver's message
  EXPECT_EQ(output.out(0), std::string(100000, 'o'));  // relayed once over the bound
}

}  // namespace
}  // namespace edt::launcher
