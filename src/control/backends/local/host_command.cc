#include "control/backends/local/host_command.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "common/process.h"

namespace edt::control {
namespace {

// Everything `fd` gives until its end.
std::string read_all(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace

Result<std::string> run_host_command(const std::vector<std::string>& argv, const std::string& packages) {
  // Made before fork (edtd has threads): an allocation in the child can
  // wait forever on a lock that another thread held at the fork.
  const std::vector<char*> args = proc::c_strings(argv);
  const std::string missing =
      "cannot execute " + argv[0] + (packages.empty() ? "" : ": install its Debian package (" + packages + ")") + "\n";
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return io_error("pipe", errno);
  pid_t pid = fork();
  if (pid < 0) {
    ::close(out[0]);
    ::close(out[1]);
    return io_error("fork", errno);
  }
  if (pid == 0) {
    proc::unblock_signals();
    int null = ::open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(out[1], 2) < 0) _exit(126);
    close_range(3, ~0u, 0);
    execv(args[0], args.data());
    (void)!::write(1, missing.data(), missing.size());
    _exit(127);
  }
  ::close(out[1]);
  std::string text = read_all(out[0]);
  ::close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return text;
  std::string command;
  for (const auto& a : argv) command += (command.empty() ? "" : " ") + a;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return internal_error("`" + command + "` failed (status " + std::to_string(status) + "): " + text);
}

}  // namespace edt::control
