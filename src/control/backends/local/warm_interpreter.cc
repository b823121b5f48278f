#include "control/backends/local/warm_interpreter.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/process.h"

namespace edt::control {

namespace {

constexpr std::chrono::seconds kRestartInterval{60};
constexpr std::chrono::seconds kStopTimeout{5};

// Starts the server as edtd's child: it gets SIGTERM when edtd dies.
pid_t spawn_server(const WarmInterpreterOptions& o) {
  std::vector<std::string> argv = {o.python, "-m", "edt._warm", "--socket", o.dir + "/python.sock"};
  if (!o.containers_dir.empty()) argv.insert(argv.end(), {"--containers", o.containers_dir});
  if (!o.seccomp_path.empty()) argv.insert(argv.end(), {"--seccomp", o.seccomp_path});
  std::vector<std::string> env;
  for (const auto& [key, value] : o.env) env.push_back(key + "=" + value);
  const std::vector<char*> args = proc::c_strings(argv), envp = proc::c_strings(env);
  const std::string log_path = o.dir + "/log";
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  // Only async-signal-safe calls from here: edtd has threads.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(1);
  setsid();
  proc::unblock_signals();
  int null = open("/dev/null", O_RDONLY);
  int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (null < 0 || log < 0) _exit(126);
  dup2(null, 0);
  dup2(log, 1);
  dup2(log, 2);
  close_range(3, ~0u, 0);
  execve(args[0], args.data(), envp.data());
  _exit(127);
}

}  // namespace

WarmInterpreter::WarmInterpreter(WarmInterpreterOptions options) : options_(std::move(options)) {}

WarmInterpreter::~WarmInterpreter() { stop(); }

void WarmInterpreter::reap() {
  if (pid_ == 0) return;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return;
  log::warn("the warm Python interpreter (pid {}) ended ({} {}); see {}/log", pid_,
            WIFSIGNALED(status) ? "signal" : "exit code", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
            options_.dir);
  pid_ = 0;
}

void WarmInterpreter::keep() {
  if (!options_.enabled) return;
  std::lock_guard lock(mu_);
  reap();
  const auto now = std::chrono::steady_clock::now();
  if (pid_ != 0 || (last_start_ && now - *last_start_ < kRestartInterval)) return;
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  ::chmod(options_.dir.c_str(), 0755);
  pid_ = spawn_server(options_);
  last_start_ = now;
  if (pid_ < 0) {
    log::warn("cannot start the warm Python interpreter: {}", std::strerror(errno));
    pid_ = 0;
  }
}

void WarmInterpreter::stop() {
  std::lock_guard lock(mu_);
  if (pid_ == 0) return;
  kill(pid_, SIGTERM);
  // It exits at once; edtd's own stop never waits on it for long.
  const auto deadline = std::chrono::steady_clock::now() + kStopTimeout;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (waitpid(pid_, &status, WNOHANG) == 0) {
    log::warn("the warm Python interpreter (pid {}) did not end within {} s of SIGTERM; killing it", pid_,
              kStopTimeout.count());
    kill(pid_, SIGKILL);
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = 0;
}

}  // namespace edt::control
