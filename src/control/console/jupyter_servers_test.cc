// JupyterServers against a backend whose "container" is a shell on this
// machine: the start script picks the server the image has, reports an
// image without one in the server's own words, and a running server is
// reused rather than started again.
#include "control/console/jupyter_servers.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "common/process.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;

// Runs exec()'s command with /bin/sh here, with PATH = `path` only (the
// test's "image", which has no Jupyter but what the test puts there).
class ShellBackend : public Backend {
 public:
  explicit ShellBackend(std::string path) : path_(std::move(path)) {}
  int execs = 0;

  Result<SandboxRef> exec(const SandboxRef&, const ExecSpec& spec) override {
    ++execs;
    std::vector<std::string> env = {"PATH=" + path_};
    for (const auto& [key, value] : spec.env)
      if (key != "PATH") env.push_back(key + "=" + value);
    const std::vector<std::string> argv = {"/bin/sh", "-c", spec.command};
    auto args = proc::c_strings(argv);
    auto envp = proc::c_strings(env);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int log = ::open(spec.log_path.c_str(), O_WRONLY | O_APPEND);
      ::dup2(log, 1);
      ::dup2(log, 2);
      ::execve("/bin/sh", args.data(), envp.data());
      _exit(127);
    }
    return proc::identify(pid).value_or(SandboxRef{pid, 0});
  }
  Status prepare_cluster(const std::string&) override { return Status::ok(); }
  Result<SandboxRef> start(const SandboxSpec&) override { return SandboxRef{}; }
  SandboxState observe(const std::string&, const SandboxRef&) override { return SandboxState::kReady; }
  Status signal(const SandboxRef&, int) override { return Status::ok(); }
  Result<int> training_processes(const SandboxRef&) override { return 0; }
  Status remove(const std::string&) override { return Status::ok(); }
  Status write_cluster_files(const std::string&, const ClusterFiles&) override { return Status::ok(); }
  Status remove_cluster(const std::string&) override { return Status::ok(); }
  Result<std::string> ssh_private_key(const std::string&) override { return std::string(); }
  int ssh_port() const override { return 22; }

 private:
  std::string path_;
};

class JupyterServersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("edt-jupyter-servers-" + std::to_string(::getpid()));
    // The "image": only what the start script needs besides the shell.
    fs::create_directories(dir_ / "bin");
    for (const char* tool : {"cat", "grep", "sleep"}) fs::create_symlink(std::string("/bin/") + tool, dir_ / "bin" / tool);
    cluster_.spec.name = "tthvd";
    cluster_.spec.image = "bare";
    launcher_.status.name = "tthvd-launcher";
    launcher_.status.address = "127.0.0.1";
    launcher_.sandbox = proc::identify(::getpid()).value();
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  Cluster cluster_;
  ContainerRecord launcher_;
};

TEST_F(JupyterServersTest, AnImageWithoutJupyterIsAConflictInTheServersWords) {
  ShellBackend backend((dir_ / "bin").string());
  JupyterServers servers(&backend, (dir_ / "jupyter").string(), {});
  auto endpoint = servers.ensure(cluster_, launcher_);
  ASSERT_FALSE(endpoint.is_ok());
  EXPECT_EQ(endpoint.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(endpoint.status().message().find("image bare"), std::string::npos) << endpoint.status().message();
  EXPECT_NE(endpoint.status().message().find("neither jupyter-lab nor jupyter-notebook"), std::string::npos)
      << endpoint.status().message();
}

TEST_F(JupyterServersTest, ARunningServerIsReusedWithItsToken) {
  // A stand-in jupyter-notebook: says it runs (with its arguments), then waits.
  std::ofstream(dir_ / "bin/jupyter-notebook") << "#!/bin/sh\necho \"$@\"\necho \"is running at\"\nexec sleep 60\n";
  fs::permissions(dir_ / "bin/jupyter-notebook", fs::perms::owner_all);
  ShellBackend backend((dir_ / "bin").string());
  JupyterServers servers(&backend, (dir_ / "jupyter").string(), {});
  auto first = servers.ensure(cluster_, launcher_);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  EXPECT_EQ(first->base_url, "/c/tthvd/jupyter/");
  EXPECT_EQ(first->token.size(), 64u);
  auto second = servers.ensure(cluster_, launcher_);
  ASSERT_TRUE(second.is_ok());
  EXPECT_EQ(second->token, first->token);
  EXPECT_EQ(second->port, first->port);
  EXPECT_EQ(backend.execs, 1);
  std::ifstream log(dir_ / "jupyter/tthvd.log");
  const std::string args((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(args.find("--port=" + std::to_string(first->port)), std::string::npos) << args;
  EXPECT_NE(args.find("--NotebookApp.base_url=/c/tthvd/jupyter/"), std::string::npos) << args;
  EXPECT_EQ(args.find(first->token), std::string::npos) << "the token is on the command line: " << args;
  std::ifstream pid_file("/tmp/.edt-jupyter.pid");
  int64_t pid = 0;
  pid_file >> pid;
  if (pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
  // The "container" was this machine: its /tmp holds the server's pid file.
  fs::remove("/tmp/.edt-jupyter.pid");
}

}  // namespace
}  // namespace edt::control
