#include "control/backends/local/enter.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/process.h"
#include "control/backends/local/cgroups.h"
#include "control/backends/local/sandbox_policy.h"

namespace edt::control {

namespace {

constexpr int kCannotEnter = 125;

// The namespaces a container has, in the order they are entered (enter()
// says where user goes); mnt last of the others.
constexpr const char* kNamespaces[] = {"user", "cgroup", "ipc", "uts", "net", "pid", "mnt"};

int fail(const std::string& what, int error = 0) {
  std::fprintf(stderr, "edtd enter-container: %s%s%s\n", what.c_str(), error ? ": " : "", error ? std::strerror(error) : "");
  return kCannotEnter;
}

// The container's init, with its namespaces, root and cgroups opened through
// its pinned /proc directory, so that none of them can be another process's
// that took a reused pid (proc::PinnedProcess).
struct Target {
  int ns[std::size(kNamespaces)];
  int root = -1;
  std::string cgroups;
};

// Opens `pid` (started at `start_time`, 0: unknown) as a container's init;
// returns 0 or an exit code.
int open_target(int64_t pid, uint64_t start_time, Target& target) {
  auto pinned = proc::PinnedProcess::open(pid, start_time);
  if (!pinned.is_ok()) return fail("the container is not running: " + pinned.status().message());
  if (!proc::namespace_init(pinned->read("status")))
    return fail("process " + std::to_string(pid) + " is not a container's init");
  target.cgroups = pinned->read("cgroup");
  for (size_t i = 0; i < std::size(kNamespaces); ++i) {
    target.ns[i] = pinned->open_entry(std::string("ns/") + kNamespaces[i], O_RDONLY);
    if (target.ns[i] < 0) return fail(std::string("open the container's ") + kNamespaces[i] + " namespace", errno);
  }
  target.root = pinned->open_entry("root", O_RDONLY | O_DIRECTORY);
  if (target.root < 0) return fail("open the container's root", errno);
  // Alive after every read: they were all of the process the pidfd names.
  if (!pinned->still_alive()) return fail("the container stopped while it was entered");
  return 0;
}

// Whether namespace fd `fd` is the one this process is in (`kind`, from
// /proc/self/ns).
bool ours(int fd, const char* kind) {
  struct stat theirs {}, mine {};
  return fstat(fd, &theirs) == 0 && stat((std::string("/proc/self/ns/") + kind).c_str(), &mine) == 0 &&
         theirs.st_ino == mine.st_ino && theirs.st_dev == mine.st_dev;
}

// Enters the target's namespaces and root; returns 0 or an exit code. The
// user namespace that owns its other namespaces first: the container's own
// (it made them), or, where bubblewrap nested the container's user
// namespace in the one it made them in (unprivileged, a container that
// runs as its own user), that outer one; the container's own last.
int enter(const Target& target) {
  const uid_t host_uid = getuid();
  bool entered[std::size(kNamespaces)];
  for (size_t i = 0; i < std::size(kNamespaces); ++i) entered[i] = !ours(target.ns[i], kNamespaces[i]);
  const int owner = ioctl(target.ns[2], NS_GET_USERNS);  // the ipc namespace's
  if (owner < 0) return fail("find the user namespace of the container's namespaces", errno);
  const bool enter_owner = !ours(owner, "user");
  if (enter_owner && setns(owner, CLONE_NEWUSER) != 0) return fail("enter the container's outer user namespace", errno);
  struct stat own {}, user {};
  const bool nested = fstat(owner, &own) == 0 && fstat(target.ns[0], &user) == 0 && own.st_ino != user.st_ino;
  ::close(owner);
  for (size_t i = 1; i < std::size(kNamespaces); ++i)
    if (entered[i] && setns(target.ns[i], 0) != 0)
      return fail(std::string("enter the container's ") + kNamespaces[i] + " namespace", errno);
  if (entered[0] && (nested || !enter_owner) && setns(target.ns[0], CLONE_NEWUSER) != 0)
    return fail("enter the container's user namespace", errno);
  for (int fd : target.ns) ::close(fd);
  if (fchdir(target.root) != 0 || chroot(".") != 0 || chdir("/") != 0)
    return fail("enter the container's root", errno);
  ::close(target.root);
  // In the container's user namespace our host ids are not mapped: become
  // its root, as a login is. A container that runs as its own user maps
  // that user alone, to itself: we stay it.
  if (entered[0] && getuid() != host_uid &&
      (setresgid(0, 0, 0) != 0 || setgroups(0, nullptr) != 0 || setresuid(0, 0, 0) != 0))
    return fail("become root of the container's user namespace", errno);
  return 0;
}

// "<pid>" or "<pid>:<start time>" (field 22 of /proc/<pid>/stat).
bool parse_target(std::string_view text, int64_t& pid, uint64_t& start_time) {
  const size_t colon = text.find(':');
  const std::string_view pid_text = text.substr(0, colon);
  auto [end, ec] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
  if (ec != std::errc() || end != pid_text.data() + pid_text.size() || pid <= 0) return false;
  if (colon == std::string_view::npos) return true;
  const std::string_view start = text.substr(colon + 1);
  auto [end2, ec2] = std::from_chars(start.data(), start.data() + start.size(), start_time);
  return ec2 == std::errc() && end2 == start.data() + start.size() && start_time > 0;
}

// An id of the container's (below kContainerIds), in decimal.
std::optional<uint32_t> container_id(std::string_view text) {
  const std::optional<uint32_t> id = parse_id(text);
  return id && *id < kContainerIds ? id : std::nullopt;
}

// Becomes `user` of the container, with its groups; no capability stays
// (a uid other than 0 loses them all).
int become(const ContainerUser& user) {
  std::vector<gid_t> groups(user.groups.begin(), user.groups.end());
  if (setgroups(groups.size(), groups.data()) != 0 || setresgid(user.gid, user.gid, user.gid) != 0 ||
      setresuid(user.uid, user.uid, user.uid) != 0)
    return fail("become the container's user " + std::to_string(user.uid), errno);
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

std::string user_ids(const ContainerUser& user) {
  std::string ids = std::to_string(user.uid) + ":" + std::to_string(user.gid);
  for (size_t i = 0; i < user.groups.size(); ++i) ids += (i == 0 ? ":" : ",") + std::to_string(user.groups[i]);
  return ids;
}

std::optional<ContainerUser> parse_user_ids(std::string_view text) {
  const size_t first = text.find(':');
  if (first == std::string_view::npos) return std::nullopt;
  const std::string_view rest = text.substr(first + 1);
  const size_t second = rest.find(':');
  auto uid = container_id(text.substr(0, first));
  auto gid = container_id(rest.substr(0, second));
  if (!uid || !gid || (second != std::string_view::npos && second + 1 == rest.size())) return std::nullopt;
  ContainerUser user;
  user.uid = *uid;
  user.gid = *gid;
  for (std::string_view groups = second == std::string_view::npos ? "" : rest.substr(second + 1); !groups.empty();) {
    const size_t comma = groups.find(',');
    auto group = container_id(groups.substr(0, comma));
    if (!group || comma + 1 == groups.size()) return std::nullopt;
    user.groups.push_back(*group);
    groups = comma == std::string_view::npos ? "" : groups.substr(comma + 1);
  }
  return user;
}

int enter_container_main(int argc, char** argv) {
  int64_t pid = 0;
  uint64_t start_time = 0;
  std::optional<ContainerUser> user;
  int command = 4;
  if (argc > 5 && std::string_view(argv[3]) == "--user") {
    user = parse_user_ids(argv[4]);
    command = user ? 6 : argc;
  }
  if (argc <= command || !parse_target(argv[2], pid, start_time) || std::string_view(argv[command - 1]) != "--")
    return fail("usage: edtd enter-container <pid of the container's init>[:<its start time>] "
                "[--user UID:GID[:GROUP,...]] -- <program> [args...]");
  // Blocked before the fork, so the child's SIGCHLD is not lost; the child
  // unblocks them.
  sigset_t signals, old;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&signals, sig);
  sigprocmask(SIG_BLOCK, &signals, &old);
  Target target;
  if (int rc = open_target(pid, start_time, target); rc != 0) return rc;
  // Its cgroups first: the host's /sys/fs/cgroup is out of sight inside.
  if (Status st = join_cgroups(target.cgroups); !st.is_ok())
    return fail("join the container's cgroups: " + st.message());
  if (int rc = enter(target); rc != 0) return rc;
  if (Status st = confine_self(); !st.is_ok()) return fail(st.message());
  if (user && getuid() == 0)
    if (int rc = become(*user); rc != 0) return rc;
  // The PID namespace applies to children only.
  const pid_t child = fork();
  if (child < 0) return fail("fork", errno);
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &old, nullptr);
    execvp(argv[command], argv + command);
    std::fprintf(stderr, "edtd enter-container: cannot run %s: %s\n", argv[command], std::strerror(errno));
    _exit(127);
  }
  return wait_for(child);
}

}  // namespace edt::control
