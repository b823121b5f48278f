#include "launcher/ssh.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "launcher/process.h"
#include "launcher/test_util.h"

namespace edt::launcher {
namespace {

using namespace edt::launcher::test_util;

TEST(ShellQuote, SurvivesTheShell) {
  std::string tricky = "it's \"$HOME\" `x` \\ $(y) ; \n end";
  auto p = Process::spawn({{"sh", "-c", "printf '%s' " + shell_quote(tricky)}, {"PATH=/usr/bin:/bin"}});
  ASSERT_TRUE(p.is_ok());
  std::string out;
  char buffer[256];
  ssize_t n;
  while ((n = read(p.value()->stdout_fd(), buffer, sizeof buffer)) != 0) {
    if (n > 0) out.append(buffer, static_cast<size_t>(n));
  }
  EXPECT_EQ(out, tricky);
}

TEST(SshCommand, BatchModePortIdentityAndOptions) {
  SshOptions options;
  options.port = 2222;
  options.identity_file = "/k";
  options.options = {"UserKnownHostsFile=/dev/null", "StrictHostKeyChecking=yes"};
  options.connect_timeout = std::chrono::seconds(7);
  auto argv = ssh_command("127.0.0.2", options, "echo hi");
  std::string joined;
  for (const auto& a : argv) joined += a + " ";
  EXPECT_EQ(argv.front(), "ssh");
  for (const char* part : {"-o BatchMode=yes ", "-p 2222 ", "-i /k ", "-o UserKnownHostsFile=/dev/null ", "-o ConnectTimeout=7 "}) {
    EXPECT_NE(joined.find(part), std::string::npos) << part << " in " << joined;
  }
  // The user's choice comes first, which is the one ssh keeps.
  EXPECT_LT(joined.find("StrictHostKeyChecking=yes"), joined.find("StrictHostKeyChecking=no"));
  EXPECT_EQ(argv[argv.size() - 2], "127.0.0.2");
  EXPECT_EQ(argv.back(), "exec /bin/sh -c 'echo hi'");
}

TEST(SshCommand, HostKeysUncheckedUnlessConfigured) {
  SshOptions options;
  auto joined = [&](bool configured) {
    std::string out;
    for (const auto& a : ssh_command("h", options, "true", configured)) out += a + " ";
    return out;
  };
  EXPECT_NE(joined(false).find("-o StrictHostKeyChecking=no "), std::string::npos);
  EXPECT_EQ(joined(true).find("StrictHostKeyChecking"), std::string::npos) << joined(true);
}

TEST(HostKeyCheckingConfigured, ReadsWhatSshWouldUse) {
  const std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
  SshOptions options;
  for (const auto& [value, configured] : std::vector<std::pair<std::string, bool>>{
           {"yes", true}, {"accept-new", true}, {"no", true}, {"ask", false}}) {
    options.options = {"StrictHostKeyChecking=" + value};
    EXPECT_EQ(host_key_checking_configured("127.0.0.2", options, env), configured) << value;
  }
}

TEST(HostKeyCheckingConfigured, FromTheConfigurationOrNotAtAll) {
  // Stand-ins for ssh -G: one that says what a configuration file set, one
  // with ssh's default, one that fails.
  char pattern[] = "/tmp/edt-ssh-g-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  const std::vector<std::string> env = {"PATH=" + dir + ":/usr/bin:/bin"};
  auto fake = [&](const std::string& body) {
    std::ofstream(dir + "/ssh") << "#!/bin/sh\n" << body << "\n";
    chmod((dir + "/ssh").c_str(), 0755);
  };
  fake("echo 'user root'; echo 'stricthostkeychecking true'; echo 'port 22'");
  EXPECT_TRUE(host_key_checking_configured("h", {}, env));
  fake("echo 'stricthostkeychecking ask'");
  EXPECT_FALSE(host_key_checking_configured("h", {}, env));
  fake("echo 'bad option' >&2; exit 255");
  EXPECT_FALSE(host_key_checking_configured("h", {}, env));
  std::filesystem::remove_all(dir);
}

TEST(SettleHostKeyChecking, DropsOursOnlyWhereTheConfigurationSetsIt) {
  // A stand-in for ssh -G that records what it was asked.
  char pattern[] = "/tmp/edt-ssh-g-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  const std::vector<std::string> env = {"PATH=" + dir + ":/usr/bin:/bin"};
  auto fake = [&](const std::string& value) {
    std::ofstream(dir + "/ssh") << "#!/bin/sh\necho \"$@\" > " << dir << "/asked\necho 'stricthostkeychecking "
                                << value << "'\n";
    chmod((dir + "/ssh").c_str(), 0755);
  };
  auto asked = [&] {
    std::string line;
    std::getline(std::ifstream(dir + "/asked"), line);
    std::filesystem::remove(dir + "/asked");
    return line;
  };
  SshOptions options;
  options.options = {"User=alice"};
  const auto unsure = ssh_command("h", options, "true", false);
  fake("true");
  EXPECT_EQ(settle_host_key_checking(unsure, env), ssh_command("h", options, "true", true));
  EXPECT_EQ(asked().find("-G -T -x -a -o User=alice -o BatchMode=yes"), 0u);  // ours and the command left out
  fake("ask");
  EXPECT_EQ(settle_host_key_checking(unsure, env), unsure);
  const std::string last = asked();
  EXPECT_TRUE(last.ends_with(" h")) << last;
  const auto sure = ssh_command("h", options, "true", true);
  EXPECT_EQ(settle_host_key_checking(sure, env), sure);
  EXPECT_EQ(asked(), "");  // nothing to settle: ssh -G is not asked
  std::filesystem::remove_all(dir);
}

// The wrapper is plain sh, so it is tested here without ssh: stdin plays the
// ssh channel.
std::unique_ptr<Process> run_wrapper(const std::vector<std::string>& command, const Environment& env,
                                     const std::string& cwd = "/tmp", bool warm = false) {
  std::string script = remote_worker_script(cwd, env, command, std::chrono::seconds(1), warm);
  SpawnOptions spawn{{"/bin/sh", "-c", script}, {"PATH=/usr/bin:/bin"}, true};
  auto p = Process::spawn(spawn);
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  return std::move(p).value();
}

TEST(RemoteWorkerScript, MarkerEnvironmentDirectoryAndExitCode) {
  auto p = run_wrapper({"sh", "-c", "echo \"$A|$B|$(pwd)\"; exit 7"}, {{"A", "x y"}, {"B", "it's"}});
  EXPECT_EQ(read_line(p->stdout_fd()), kStartedMarker);
  EXPECT_EQ(read_line(p->stdout_fd()), "x y|it's|/tmp");
  EXPECT_EQ(wait_exit(*p).code, 7);
}

TEST(RemoteWorkerScript, WarmGoesThroughEdtWarmRunWhereTheHostHasIt) {
  char dir[] = "/tmp/edt-warm-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string client = std::string(dir) + "/edt-warm-run";
  std::ofstream(client) << "#!/bin/sh\necho \"via client: $*\"\nexec \"$@\"\n";
  chmod(client.c_str(), 0755);
  const Environment with_client = {{"PATH", std::string(dir) + ":/usr/bin:/bin"}};
  auto warm = run_wrapper({"sh", "-c", "echo ran"}, with_client, "/tmp", true);
  EXPECT_EQ(read_line(warm->stdout_fd()), kStartedMarker);
  EXPECT_EQ(read_line(warm->stdout_fd()), "via client: sh -c echo ran");
  EXPECT_EQ(read_line(warm->stdout_fd()), "ran");
  EXPECT_EQ(wait_exit(*warm).code, 0);
  auto without = run_wrapper({"sh", "-c", "echo ran"}, {{"PATH", "/usr/bin:/bin"}}, "/tmp", true);
  EXPECT_EQ(read_line(without->stdout_fd()), kStartedMarker);
  EXPECT_EQ(read_line(without->stdout_fd()), "ran");
  EXPECT_EQ(wait_exit(*without).code, 0);
  auto cold = run_wrapper({"sh", "-c", "echo ran"}, with_client, "/tmp", false);
  EXPECT_EQ(read_line(cold->stdout_fd()), kStartedMarker);
  EXPECT_EQ(read_line(cold->stdout_fd()), "ran");
  EXPECT_EQ(wait_exit(*cold).code, 0);
  std::filesystem::remove_all(dir);
}

TEST(RemoteWorkerScript, ClosingStdinStopsTheWorkerAndItsChildren) {
  auto p = run_wrapper({"sh", "-c", "sleep 100 & echo $!; wait"}, {});
  EXPECT_EQ(read_line(p->stdout_fd()), kStartedMarker);
  pid_t sleeper = std::stoi(read_line(p->stdout_fd()));
  EXPECT_TRUE(alive(sleeper));
  p->close_stdin();
  EXPECT_EQ(wait_exit(*p).code, 128 + SIGTERM);
  EXPECT_TRUE(wait_until_dead(sleeper));
}

TEST(RemoteWorkerScript, WorkerIgnoringSigtermIsKilledAfterTheGrace) {
  auto p = run_wrapper({"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"}, {});
  EXPECT_EQ(read_line(p->stdout_fd()), kStartedMarker);
  EXPECT_EQ(read_line(p->stdout_fd()), "ready");
  auto start = std::chrono::steady_clock::now();
  p->close_stdin();
  EXPECT_EQ(wait_exit(*p).code, 128 + SIGKILL);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
}

TEST(RemoteWorkerScript, MissingCommandOrDirectoryExits127WithAMessage) {
  auto p = run_wrapper({"no-such-command-edt"}, {});
  std::string err = read_line(p->stderr_fd());
  EXPECT_NE(err.find("edtrun: command no-such-command-edt not found on "), std::string::npos) << err;
  EXPECT_EQ(wait_exit(*p).code, 127);
  auto q = run_wrapper({"true"}, {}, "/no/such/dir");
  err = read_line(q->stderr_fd());
  EXPECT_NE(err.find("edtrun: directory /no/such/dir does not exist on "), std::string::npos) << err;
  EXPECT_EQ(wait_exit(*q).code, 127);
}

}  // namespace
}  // namespace edt::launcher
