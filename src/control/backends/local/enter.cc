#include "control/backends/local/enter.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "control/backends/local/cgroups.h"
#include "control/backends/local/sandbox_policy.h"

namespace edt::control {

namespace {

constexpr int kCannotEnter = 125;

// The namespaces a container has, in the order they are entered: user
// first (it owns the others), mnt last (/proc/<pid>/ns is read from ours).
constexpr const char* kNamespaces[] = {"user", "cgroup", "ipc", "uts", "net", "pid", "mnt"};

int fail(const std::string& what, int error = 0) {
  std::fprintf(stderr, "edtd enter-container: %s%s%s\n", what.c_str(), error ? ": " : "", error ? std::strerror(error) : "");
  return kCannotEnter;
}

// Enters the namespaces and root of `pid`; returns 0 or an exit code.
int enter(const std::string& pid) {
  const std::string base = "/proc/" + pid + "/";
  int fds[std::size(kNamespaces)];
  for (size_t i = 0; i < std::size(kNamespaces); ++i) {
    fds[i] = ::open((base + "ns/" + kNamespaces[i]).c_str(), O_RDONLY | O_CLOEXEC);
    if (fds[i] < 0) return fail("open " + base + "ns/" + kNamespaces[i], errno);
  }
  const int root = ::open((base + "root").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return fail("open " + base + "root", errno);
  bool user_namespace = false;
  for (size_t i = 0; i < std::size(kNamespaces); ++i) {
    struct stat theirs {}, ours {};
    const bool same = fstat(fds[i], &theirs) == 0 &&
                      stat((std::string("/proc/self/ns/") + kNamespaces[i]).c_str(), &ours) == 0 &&
                      theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev;
    if (!same && setns(fds[i], 0) != 0)
      return fail(std::string("enter the container's ") + kNamespaces[i] + " namespace", errno);
    user_namespace = user_namespace || (!same && i == 0);
    ::close(fds[i]);
  }
  if (fchdir(root) != 0 || chroot(".") != 0 || chdir("/") != 0) return fail("enter the container's root", errno);
  ::close(root);
  // In the container's user namespace our host ids are not mapped: become
  // its root, as a login is.
  if (user_namespace && (setresgid(0, 0, 0) != 0 || setgroups(0, nullptr) != 0 || setresuid(0, 0, 0) != 0))
    return fail("become root of the container's user namespace", errno);
  return 0;
}

// The child's exit status as an exit code, once it ends; SIGTERM, SIGINT
// and SIGHUP meanwhile go to it.
int wait_for(pid_t child) {
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&signals, sig);
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done < 0 && errno != EINTR) return fail("wait for the command", errno);
    int sig = 0;
    if (sigwait(&signals, &sig) == 0 && sig != SIGCHLD) ::kill(child, sig);
  }
}

}  // namespace

int enter_container_main(int argc, char** argv) {
  int pid = 0;
  const std::string_view pid_text = argc > 2 ? argv[2] : "";
  auto [end, ec] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
  if (argc < 5 || ec != std::errc() || end != pid_text.data() + pid_text.size() || pid <= 0 ||
      std::string_view(argv[3]) != "--")
    return fail("usage: edtd enter-container <pid of the container's init> -- <program> [args...]");
  // Blocked before the fork, so the child's SIGCHLD is not lost; the child
  // unblocks them.
  sigset_t signals, old;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&signals, sig);
  sigprocmask(SIG_BLOCK, &signals, &old);
  // Its cgroups first: the host's /sys/fs/cgroup is out of sight inside.
  if (Status st = join_cgroups_of(pid); !st.is_ok()) return fail("join the container's cgroups: " + st.message());
  if (int rc = enter(std::string(pid_text)); rc != 0) return rc;
  if (Status st = confine_self(); !st.is_ok()) return fail(st.message());
  // The PID namespace applies to children only.
  const pid_t child = fork();
  if (child < 0) return fail("fork", errno);
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &old, nullptr);
    execvp(argv[4], argv + 4);
    std::fprintf(stderr, "edtd enter-container: cannot run %s: %s\n", argv[4], std::strerror(errno));
    _exit(127);
  }
  return wait_for(child);
}

}  // namespace edt::control
