#include "launcher/process.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/process.h"

namespace edt::launcher {
namespace {

void close_fd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// PATH from the child's environment, as a shell would search it.
std::string path_of(const std::vector<std::string>& env) {
  for (const auto& entry : env) {
    if (entry.rfind("PATH=", 0) == 0) return entry.substr(5);
  }
  return "/usr/local/bin:/usr/bin:/bin";
}

Result<std::string> find_program(const std::string& name, const std::vector<std::string>& env) {
  if (name.empty()) return invalid_argument("the command is empty; give the program to run after the options");
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) == 0) return name;
    return io_error("cannot run '" + name + "' (check the path and that it is executable)", errno);
  }
  std::string path = path_of(env);
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return not_found("command '" + name + "' not found in PATH (" + path + "); give its full path or fix PATH");
}

// Between fork and exec only async-signal-safe calls: edtrun has threads (the
// store server). Reports a failure through `error_fd` and never returns.
[[noreturn]] void exec_child(const char* program, char* const argv[], char* const envp[], int stdin_fd, int stdout_fd,
                             int stderr_fd, int error_fd, pid_t parent, bool own_session) {
  if (!own_session || setsid() < 0) setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(1);  // edtrun died before prctl took effect
  proc::unblock_signals();
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD, SIGHUP}) signal(sig, SIG_DFL);
  if (dup2(stdin_fd, 0) < 0 || dup2(stdout_fd, 1) < 0 || dup2(stderr_fd, 2) < 0) {
    int err = errno;
    (void)!write(error_fd, &err, sizeof err);
    _exit(127);
  }
  // Nothing of edtrun's (the store's sockets, other workers' pipes) leaks.
  syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  execve(program, argv, envp);
  int err = errno;
  (void)!write(error_fd, &err, sizeof err);
  _exit(127);
}

}  // namespace

std::string ExitStatus::describe() const {
  if (signal != 0) return "was killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exited with code " + std::to_string(code);
}

Result<std::unique_ptr<Process>> Process::spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return invalid_argument("no command given; put the program to run after the options");
  EDT_ASSIGN_OR_RETURN(std::string program, find_program(options.argv[0], options.env));
  std::vector<char*> argv = proc::c_strings(options.argv);
  std::vector<char*> envp = proc::c_strings(options.env);

  // Pipes: [0] read, [1] write. All close-on-exec; the child dup2s its ends.
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, error[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {in, out, err, error}) {
      close_fd(&p[0]);
      close_fd(&p[1]);
    }
  };
  bool ok = pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0 && pipe2(error, O_CLOEXEC) == 0;
  if (ok) {
    if (options.stdin_pipe) {
      ok = pipe2(in, O_CLOEXEC) == 0;
    } else {
      in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
      ok = in[0] >= 0;
    }
  }
  if (!ok) {
    int e = errno;
    close_all();
    return io_error("cannot make pipes for '" + options.argv[0] + "'", e);
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close_all();
    return io_error("cannot fork to start '" + options.argv[0] + "'", e);
  }
  if (pid == 0) {
    exec_child(program.c_str(), argv.data(), envp.data(), in[0], out[1], err[1], error[1], parent,
               options.own_session);
  }
  // Also here, so the group exists before any signal is sent. Not for a
  // session: done first, it would make the child a group leader, which
  // cannot setsid(); spawn() returns only after the child's exec (the error
  // pipe below), so its setsid() came first.
  if (!options.own_session) setpgid(pid, pid);
  close_fd(&in[0]);
  close_fd(&out[1]);
  close_fd(&err[1]);
  close_fd(&error[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(error[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  close_fd(&error[0]);

  auto process = std::unique_ptr<Process>(new Process());
  process->pid_ = pid;
  process->stdin_fd_ = in[1];
  process->stdout_fd_ = out[0];
  process->stderr_fd_ = err[0];
  if (n > 0) {
    process->poll_exit();
    while (!process->exit_status_) {
      usleep(1000);
      process->poll_exit();
    }
    return io_error("cannot run '" + program + "'", exec_errno);
  }
  fcntl(process->stdout_fd_, F_SETFL, O_NONBLOCK);
  fcntl(process->stderr_fd_, F_SETFL, O_NONBLOCK);
  return process;
}

Process::~Process() {
  if (!exit_status_) {
    signal_group(SIGKILL);
    int status;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  close_fd(&stdin_fd_);
  close_fd(&stdout_fd_);
  close_fd(&stderr_fd_);
}

void Process::close_stdout() { close_fd(&stdout_fd_); }
void Process::close_stderr() { close_fd(&stderr_fd_); }
void Process::close_stdin() { close_fd(&stdin_fd_); }

void Process::signal_group(int signal) {
  if (!exit_status_) kill(-pid_, signal);
}

std::optional<ExitStatus> Process::poll_exit() {
  if (exit_status_) return exit_status_;
  siginfo_t info{};
  if (waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != pid_) return std::nullopt;
  kill(-pid_, SIGKILL);  // leftovers; the zombie keeps the group id ours
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  ExitStatus result;
  if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  } else {
    result.code = WEXITSTATUS(status);
  }
  exit_status_ = result;
  return exit_status_;
}

}  // namespace edt::launcher
