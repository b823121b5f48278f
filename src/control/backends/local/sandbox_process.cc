#include "control/backends/local/sandbox_process.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>

#include "common/io.h"
#include "common/process.h"
#include "control/backends/local/cgroups.h"
#include "control/backends/local/host_command.h"

namespace edt::control {

namespace fs = std::filesystem;

void Pipe::close_end(int end) {
  if (fds[end] >= 0) ::close(fds[end]);
  fds[end] = -1;
}

Pipe::~Pipe() {
  close_end(0);
  close_end(1);
}

namespace {

// In a forked child: moves itself into the cgroup whose cgroup.procs file
// is `path` ("0" names the writer); async-signal-safe.
bool join_cgroup(const char* path) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  bool ok = fd >= 0 && ::write(fd, "0", 1) == 1;
  if (fd >= 0) ::close(fd);
  return ok;
}

// In a forked child: makes a user namespace, tells the parent on `ready`,
// waits until it has mapped the namespace's ids (a byte on `go`), then
// becomes the namespace's root. Async-signal-safe.
bool become_namespace_root(int ready, int go) {
  char byte = 0;
  if (unshare(CLONE_NEWUSER) != 0 || ::write(ready, "u", 1) != 1 || ::read(go, &byte, 1) != 1) return false;
  return setresgid(0, 0, 0) == 0 && setgroups(0, nullptr) == 0 && setresuid(0, 0, 0) == 0;
}

// Maps ids 0..65535 of the user namespace of `pid` (which it made, then
// wrote `ready`) to the host's `first`.., then lets it go on (`go`).
Status map_ids(pid_t pid, uint32_t first, int ready, int go) {
  char byte = 0;
  if (::read(ready, &byte, 1) != 1) return internal_error("the sandbox could not make its user namespace");
  const std::string map = "0 " + std::to_string(first) + " 65536\n";
  for (const char* file : {"/uid_map", "/gid_map"}) {
    const std::string path = "/proc/" + std::to_string(pid) + file;
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    const bool written = fd >= 0 && ::write(fd, map.data(), map.size()) == static_cast<ssize_t>(map.size());
    const int error = errno;
    if (fd >= 0) ::close(fd);
    if (!written) return io_error("write " + path, error);
  }
  if (::write(go, "g", 1) != 1) return io_error("release the sandbox's user namespace", errno);
  return Status::ok();
}

// In spawn_detached()'s grandchild, still the host's root: a mount
// namespace of its own, apart from the host's (nothing propagates either
// way), with each of `binds` made in it. Async-signal-safe.
bool stage_binds(const StagedBinds& binds) {
  if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  for (const auto& [source, staged] : binds)
    if (mount(source.c_str(), staged.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
  return true;
}

// In spawn_detached()'s grandchild: says why on stderr (its log), then ends
// with `code`. Async-signal-safe.
template <size_t N>
[[noreturn]] void die(const char (&why)[N], int code) {
  (void)!::write(2, why, N - 1);
  _exit(code);
}

// In spawn_detached()'s grandchild: stdin, stdout and stderr, then fds 3,
// 4 and 5 as `spec` asks. Returns the first descriptor past them.
// Async-signal-safe.
int set_descriptors(const Spawn& spec) {
  // fd5 goes above 5 first: in a process with few files open (a Slurm
  // node's helper) it is at 3 or 4, where the dup2s below put the
  // program's fds 3 and 4.
  const int fd5 = spec.fd5 < 0 ? -1 : fcntl(spec.fd5, F_DUPFD_CLOEXEC, 64);
  int in = spec.in_fd >= 0 ? spec.in_fd : ::open("/dev/null", O_RDONLY);
  int log = spec.out_fd >= 0         ? spec.out_fd
            : spec.log_path.empty() ? ::open("/dev/null", O_WRONLY)
                                    : ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (in < 0 || log < 0) _exit(126);
  dup2(in, 0);
  dup2(log, 1);
  dup2(log, 2);
  int next = 3;
  if (!spec.fd3_path.empty()) {
    int info = ::open(spec.fd3_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (info < 0 || dup2(info, next++) < 0) _exit(126);
  }
  if (!spec.fd4_path.empty()) {
    int in = ::open(spec.fd4_path.c_str(), O_RDONLY);
    if (in < 0 || dup2(in, next++) < 0) _exit(126);
  }
  if (fd5 >= 0 && dup2(fd5, next++) < 0) _exit(126);
  return next;
}

// In spawn_detached()'s grandchild: its descriptors, cgroups and user
// namespace, then the program. Async-signal-safe.
[[noreturn]] void exec_spawned(const Spawn& spec, char* const* args, char* const* envp, int ready, int go) {
  const int next = set_descriptors(spec);
  // A container's open files (cgroups.h): its processes cannot raise it.
  if (!bound_open_files()) _exit(126);
  for (const auto& procs : spec.cgroup_procs)
    if (!join_cgroup(procs.c_str())) die("edtd: could not join the container's cgroup\n", 125);
  if (!spec.staged_binds.empty() && !stage_binds(spec.staged_binds))
    die("edtd: could not bind the container's sources in its mount namespace\n", 123);
  if (spec.first_id != 0 && !become_namespace_root(ready, go))
    die("edtd: could not become root of the container's user namespace\n", 124);
  close_range(next, ~0u, 0);
  execve(args[0], args, envp);
  _exit(127);
}

}  // namespace

Result<int64_t> spawn_detached(const Spawn& spec) {
  Pipe pid_pipe, ready, go;  // the grandchild's pid; its user namespace made; mapped
  for (Pipe* p : {&pid_pipe, &ready, &go})
    if (pipe2(p->fds, O_CLOEXEC) != 0) return io_error("pipe", errno);
  // Everything the child needs is made before fork: after it, only
  // async-signal-safe calls.
  const std::vector<char*> args = proc::c_strings(spec.argv), envp = proc::c_strings(spec.env);
  pid_t child = fork();
  if (child < 0) return io_error("fork", errno);
  if (child == 0) {
    setsid();
    proc::unblock_signals();
    pid_t grandchild = fork();
    if (grandchild != 0) {
      int64_t pid = grandchild;
      (void)!::write(pid_pipe.fds[1], &pid, sizeof(pid));
      _exit(0);
    }
    // Above the descriptors exec_spawned() sets, and only its ends.
    const int ready_end = fcntl(ready.fds[1], F_DUPFD_CLOEXEC, 64), go_end = fcntl(go.fds[0], F_DUPFD_CLOEXEC, 64);
    for (int fd : {ready.fds[0], ready.fds[1], go.fds[0], go.fds[1]}) ::close(fd);
    exec_spawned(spec, args.data(), envp.data(), ready_end, go_end);
  }
  pid_pipe.close_end(1);
  ready.close_end(1);
  go.close_end(0);
  int64_t pid = 0;
  ssize_t n = ::read(pid_pipe.fds[0], &pid, sizeof(pid));
  int status = 0;
  waitpid(child, &status, 0);
  if (n != sizeof(pid)) return internal_error("could not start " + spec.argv[0]);
  if (spec.first_id != 0) {
    if (Status st = map_ids(static_cast<pid_t>(pid), spec.first_id, ready.fds[0], go.fds[1]); !st.is_ok()) {
      ::kill(static_cast<pid_t>(pid), SIGKILL);
      return st.with_context("start " + spec.argv[0]);
    }
  }
  return pid;
}

Status sources_exist(const std::vector<SandboxMount>& binds) {
  std::error_code ec;
  for (const auto& bind : binds)
    if (!fs::exists(bind.host_path, ec))
      return not_found("the source of " + bind.path + ", " + bind.host_path +
                       ", is gone from the host: put it back, or make the cluster without that mount");
  return Status::ok();
}

Result<StagedBinds> stage_sources(std::vector<SandboxMount>& binds, const std::string& dir) {
  StagedBinds staged;
  std::error_code ec;
  if (::mkdir((dir + "/binds").c_str(), 0711) != 0) return io_error("mkdir " + dir + "/binds", errno);
  for (auto& bind : binds) {
    const std::string at = dir + "/binds/" + std::to_string(staged.size());
    const bool made = fs::is_directory(bind.host_path, ec) ? ::mkdir(at.c_str(), 0700) == 0
                                                           : io::write_file(at, "", 0600).is_ok();
    if (!made) return io_error("make " + at, errno);
    staged.emplace_back(bind.host_path, at);
    bind.host_path = at;
  }
  return staged;
}

Result<uint32_t> subordinate_ids(uint32_t first, int64_t range) {
  constexpr int64_t kSize = 65536;
  const int64_t start = int64_t{first} + kSize * (range - 1);
  if (range < 1 || start + kSize > int64_t{UINT32_MAX})
    return failed_precondition("the owner's subordinate id range " + std::to_string(range) +
                               " does not fit below 2^32 (first id " + std::to_string(first) +
                               "); start edtd with a lower --user-namespaces");
  return static_cast<uint32_t>(start);
}

}  // namespace edt::control
