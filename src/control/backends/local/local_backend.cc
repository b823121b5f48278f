#include "control/backends/local/local_backend.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "common/io.h"
#include "common/log.h"
#include "common/process.h"
#include "control/backends/fault_points.h"
#include "control/backends/local/container_log.h"
#include "control/backends/local/enter.h"
#include "control/backends/local/host_command.h"
#include "control/backends/local/sandbox_policy.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

Status make_dirs(const std::string& path, mode_t mode) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return Status(StatusCode::kIoError, "mkdir " + path + ": " + ec.message());
  ::chmod(path.c_str(), mode);
  return Status::ok();
}

// In a forked child: moves itself into the cgroup whose cgroup.procs file
// is `path` ("0" names the writer); async-signal-safe.
bool join_cgroup(const char* path) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  bool ok = fd >= 0 && ::write(fd, "0", 1) == 1;
  if (fd >= 0) ::close(fd);
  return ok;
}

// A pipe whose ends close with it.
struct Pipe {
  int fds[2] = {-1, -1};
  void close_end(int end) {
    if (fds[end] >= 0) ::close(fds[end]);
    fds[end] = -1;
  }
  ~Pipe() {
    close_end(0);
    close_end(1);
  }
};

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

// Binds a sandbox's first process makes before bubblewrap: (source, at).
using StagedBinds = std::vector<std::pair<std::string, std::string>>;

// What spawn_detached() starts.
struct Spawn {
  std::vector<std::string> argv, env;
  std::string log_path;   // its stdout and stderr, unless out_fd is set; empty: /dev/null
  int out_fd = -1;        // if not -1: its stdout and stderr (the container log's pipe)
  int in_fd = -1;         // if not -1: its stdin; else /dev/null
  std::string fd3_path;   // if any: its fd 3, written
  std::string fd4_path;   // if any: its fd 4, read
  int fd5 = -1;           // if not -1: its fd 5
  std::vector<std::string> cgroup_procs;  // it joins these cgroups before it execs
  uint32_t first_id = 0;  // if not 0: it runs as root of a user namespace whose ids 0..65535 are these on the host
  // If any: before that user namespace, in a mount namespace of its own, it
  // binds each first path (recursively) at the second.
  StagedBinds staged_binds;
};

// In spawn_detached()'s grandchild, still the host's root: a mount
// namespace of its own, apart from the host's (nothing propagates either
// way), with each of `binds` made in it. Async-signal-safe.
bool stage_binds(const StagedBinds& binds) {
  if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  for (const auto& [source, staged] : binds)
    if (mount(source.c_str(), staged.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
  return true;
}

// A bind whose source is gone (a volume's directory moved away) would stop
// the sandbox with a message about mounts; this one names the source.
Status sources_exist(const std::vector<SandboxMount>& binds) {
  std::error_code ec;
  for (const auto& bind : binds)
    if (!fs::exists(bind.host_path, ec))
      return not_found("the source of " + bind.path + ", " + bind.host_path +
                       ", is gone from the host: put it back, or make the cluster without that mount");
  return Status::ok();
}

// With user namespaces bubblewrap runs as the container's unprivileged
// root, which cannot pass through a directory such as /root (0700) above a
// bind's source. So the sandbox's first process, still the host's root,
// binds each source of shared_binds() at <container dir>/binds/N in a
// mount namespace of its own (Spawn::staged_binds), and bubblewrap binds it
// from there. The host's view of binds/N stays an empty directory.
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

// In spawn_detached()'s grandchild: its descriptors, cgroups and user
// namespace, then the program. Async-signal-safe.
[[noreturn]] void exec_spawned(const Spawn& spec, char* const* args, char* const* envp, int ready, int go) {
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
  // A container's open files (cgroups.h): its processes cannot raise it.
  if (!bound_open_files()) _exit(126);
  for (const auto& procs : spec.cgroup_procs) {
    if (!join_cgroup(procs.c_str())) {
      static constexpr char kWhy[] = "edtd: could not join the container's cgroup\n";
      (void)!::write(2, kWhy, sizeof(kWhy) - 1);
      _exit(125);
    }
  }
  if (!spec.staged_binds.empty() && !stage_binds(spec.staged_binds)) {
    static constexpr char kWhy[] = "edtd: could not bind the container's sources in its mount namespace\n";
    (void)!::write(2, kWhy, sizeof(kWhy) - 1);
    _exit(123);
  }
  if (spec.first_id != 0 && !become_namespace_root(ready, go)) {
    static constexpr char kWhy[] = "edtd: could not become root of the container's user namespace\n";
    (void)!::write(2, kWhy, sizeof(kWhy) - 1);
    _exit(124);
  }
  close_range(next, ~0u, 0);
  execve(args[0], args, envp);
  _exit(127);
}

// Starts spec.argv in a session of its own, not as our child: it keeps
// running when edtd exits or is killed. Returns its pid.
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
    unblock_signals();
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

// The pids in /proc now.
std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename();
    pid_t pid = 0;
    auto [ptr, ec_pid] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec_pid == std::errc() && ptr == name.data() + name.size() && !name.empty()) out.push_back(pid);
  }
  return out;
}

std::string pid_namespace(pid_t pid) {
  std::error_code ec;
  return fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/pid", ec).string();
}

// The processes whose PID namespace is that of `init`.
std::vector<pid_t> processes_in_namespace(pid_t init) {
  std::vector<pid_t> out;
  const std::string ns = pid_namespace(init);
  if (ns.empty()) return out;
  for (pid_t pid : all_pids())
    if (pid_namespace(pid) == ns) out.push_back(pid);
  return out;
}

// The label in the environment of bwrap's monitor and of the sandbox's
// init (local_backend.h).
constexpr std::string_view kLabelHome = "EDT_SANDBOX_HOME";
constexpr std::string_view kLabelCluster = "EDT_SANDBOX_CLUSTER";
constexpr std::string_view kLabelContainer = "EDT_SANDBOX_CONTAINER";

// Where a container sees the cluster's known_hosts (its mpi directory).
constexpr std::string_view kKnownHostsInContainer = "/etc/mpi/known_hosts";

// The value of `key` in `env`, a NUL-separated block that starts with a NUL.
std::string env_value(const std::string& env, std::string_view key) {
  const std::string mark = '\0' + std::string(key) + '=';
  const size_t at = env.find(mark);
  if (at == std::string::npos) return "";
  const size_t begin = at + mark.size();
  return env.substr(begin, env.find('\0', begin) - begin);
}

// A live process that carries the label of sandboxes under `home`.
struct LabelledProcess {
  pid_t pid = 0;
  proc::Stat stat;
  std::string cluster;
  std::string name;
  bool init = false;   // pid 1 of its sandbox's PID namespace: the sandbox's ref
  bool outer = false;  // in our own PID namespace: bubblewrap's monitor
};

std::vector<LabelledProcess> labelled_processes(const std::string& home) {
  std::vector<LabelledProcess> out;
  const std::string own_ns = pid_namespace(::getpid());
  const std::string mark = '\0' + std::string(kLabelHome) + '=' + home + '\0';
  for (pid_t pid : all_pids()) {
    // Another user's process reads as empty.
    const std::string env = '\0' + io::read_file("/proc/" + std::to_string(pid) + "/environ");
    if (env.find(mark) == std::string::npos) continue;
    auto stat = proc::read_stat(pid);
    if (!stat || stat->zombie()) continue;
    LabelledProcess p{pid, *stat, env_value(env, kLabelCluster), env_value(env, kLabelContainer)};
    p.outer = pid_namespace(pid) == own_ns;
    p.init = !p.outer && proc::namespace_init(io::read_file("/proc/" + std::to_string(pid) + "/status"));
    out.push_back(std::move(p));
  }
  return out;
}

// The labelled processes that are neither a sandbox in `keep` nor the
// monitor of one; the other processes in a sandbox end with its init.
std::vector<pid_t> stray_processes(const std::vector<LabelledProcess>& processes, const std::vector<SandboxRef>& keep) {
  auto kept = [&](const LabelledProcess& p) {
    return std::find(keep.begin(), keep.end(), SandboxRef{p.pid, p.stat.start_time}) != keep.end();
  };
  std::set<int64_t> monitors;
  for (const auto& p : processes)
    if (p.init && kept(p)) monitors.insert(p.stat.ppid);
  std::vector<pid_t> out;
  for (const auto& p : processes)
    if ((p.init && !kept(p)) || (p.outer && !monitors.count(p.pid))) out.push_back(p.pid);
  return out;
}

// edtd's record of a sandbox (local_backend.h, "What edtd believes"): in
// the container's directory, which no bind gives the container, as a file
// edtd owns, never read through a link.
constexpr const char* kRecordFile = "/sandbox.json";

Status write_record(const SandboxRecord& record, const std::string& dir) {
  const nlohmann::json j = {{"cluster", record.cluster},
                            {"container", record.container},
                            {"pid", record.ref.pid},
                            {"start_time", record.ref.start_time}};
  return io::replace_file(dir + kRecordFile, j.dump() + "\n", 0600);
}

std::optional<SandboxRecord> read_record(const std::string& dir) {
  const int fd = ::open((dir + kRecordFile).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::string text(4096, '\0');
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && st.st_size < 4096)
    n = ::pread(fd, text.data(), text.size(), 0);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.value("cluster", nlohmann::json()).is_string() ||
      !j.value("container", nlohmann::json()).is_string() || !j.value("pid", nlohmann::json()).is_number_integer() ||
      !j.value("start_time", nlohmann::json()).is_number_unsigned())
    return std::nullopt;
  return SandboxRecord{j["cluster"], j["container"], {j["pid"].get<int64_t>(), j["start_time"].get<uint64_t>()}};
}

// How long start() waits for the log writer to have written what a sandbox
// that failed said, before it quotes the log's tail.
constexpr auto kLastWordsWait = std::chrono::seconds(2);

// The end of a failed sandbox's log, once its writer has it all (it ends
// when every process of the sandbox is gone) or kLastWordsWait passed.
std::string last_words(const std::string& dir, const SandboxRef& writer) {
  const auto deadline = std::chrono::steady_clock::now() + kLastWordsWait;
  while (proc::alive(writer) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return container_log_tail(dir);
}

Status with_last_words(const Status& st, const std::string& dir, const SandboxRef& writer) {
  const std::string log = last_words(dir, writer);
  return log.empty() ? st : Status(st.code(), st.message() + "; the sandbox said: " + log);
}

// What any user may read: a file readable by others, a directory they may
// list and enter; a link is judged where it leads, inside the container.
bool world_readable(const fs::file_status& status) {
  const fs::perms p = status.permissions();
  if (fs::is_symlink(status)) return true;
  if (fs::is_directory(status))
    return (p & fs::perms::others_read) != fs::perms::none && (p & fs::perms::others_exec) != fs::perms::none;
  return (p & fs::perms::others_read) != fs::perms::none;
}

// The entries under `etc` (relative paths, and whether each is a directory)
// that are not world_readable(): the image's secrets (shadow, sshd's host
// keys, munge's key...), which a container does not see.
std::vector<std::pair<std::string, bool>> unreadable_entries(const std::string& etc) {
  std::vector<std::pair<std::string, bool>> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(etc, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::file_status status = it->symlink_status(ec);
    if (ec || world_readable(status)) continue;
    const bool is_dir = fs::is_directory(status);
    if (is_dir) it.disable_recursion_pending();
    out.emplace_back(fs::relative(it->path(), etc).string(), is_dir);
  }
  return out;
}

// An /etc/shadow of the container's own for the users of `passwd`: no
// password for anyone (the image's shadow is not the container's to read),
// and no account locked, since sshd refuses a locked account's keys too.
std::string shadow_for(const std::string& passwd) {
  std::istringstream lines(passwd);
  std::string line, out;
  while (std::getline(lines, line)) {
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon > 0) out += line.substr(0, colon) + ":*:0:0:99999:7:::\n";
  }
  return out;
}

WarmInterpreterOptions with_seccomp(WarmInterpreterOptions options, const std::string& path) {
  options.seccomp_path = path;
  return options;
}

std::string quote_env(const std::string& key, const std::string& value) {
  return "\"" + key + "=" + value + "\"";
}

// Gives `path` and everything under it (links themselves, not where they
// lead) to the host's `owner`, as uid and gid.
Status hand_over(const std::string& path, uint32_t owner) {
  if (::lchown(path.c_str(), owner, owner) != 0) return io_error("chown " + path, errno);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (::lchown(it->path().c_str(), owner, owner) != 0) return io_error("chown " + it->path().string(), errno);
  if (ec) return Status(StatusCode::kIoError, "read " + path + ": " + ec.message());
  return Status::ok();
}

}  // namespace

LocalBackend::LocalBackend(LocalBackendOptions options)
    : options_(std::move(options)), home_(fs::weakly_canonical(fs::absolute(options_.data_dir)).string()),
      warm_(with_seccomp(options_.warm, seccomp_path())), seccomp_(seccomp_program()),
      cgroups_(options_.cgroup_root, cgroup_key(home_)) {
  std::error_code ec;
  if (std::string why = cgroups_.unavailable({options_.pids_max, 0}); options_.pids_max > 0 && !why.empty()) {
    log::warn("containers get no bound on their number of tasks: {}", why);
    options_.pids_max = 0;
  }
  if (std::string why = bounded_disks_unavailable(); options_.container_disk.bytes > 0 && !why.empty()) {
    log::warn("containers get no bound on the bytes and files they write: {}", why);
    options_.container_disk = {};
  }
  if (options_.enter_program.empty()) options_.enter_program = fs::read_symlink("/proc/self/exe", ec).string();
  // bwrap reads the filter from this file, and so does the warm interpreter.
  if (seccomp_.is_ok()) {
    fs::create_directories(options_.data_dir, ec);
    if (Status st = io::replace_file(seccomp_path(), *seccomp_, 0644); !st.is_ok()) seccomp_ = st;
  }
  if (options_.network) {
    network_ = std::make_unique<ContainerNetwork>(*options_.network);
    // This edtd's filter (--outbound may have changed) over the containers an
    // earlier one left running; a bridge left without any goes.
    if (Status st = network_->forget(); !st.is_ok()) log::warn("{}", st.message());
  }
  // With user namespaces bwrap runs as the container's root, which must
  // pass through (not list) the data dir to what it binds.
  if (options_.first_subordinate_id != 0) {
    for (const char* sub : {"", "/containers", "/clusters", "/volumes"}) {
      fs::create_directories(options_.data_dir + sub, ec);
      ::chmod((options_.data_dir + sub).c_str(), 0711);
    }
  }
}

std::optional<std::string> cgroup_container(std::string_view proc_cgroup, std::string_view parent) {
  const std::string mark = "/" + std::string(parent) + "/";
  size_t begin = 0;
  while (begin < proc_cgroup.size()) {
    size_t end = proc_cgroup.find('\n', begin);
    if (end == std::string_view::npos) end = proc_cgroup.size();
    const std::string_view line = proc_cgroup.substr(begin, end - begin);
    begin = end + 1;
    // hierarchy-id:controllers:path; the path's last two components.
    const size_t colon = line.find(':', line.find(':') + 1);
    if (colon == std::string_view::npos) continue;
    const std::string_view path = line.substr(colon + 1);
    const size_t at = path.rfind(mark);
    if (at == std::string_view::npos) continue;
    const std::string_view name = path.substr(at + mark.size());
    if (!name.empty() && name.find('/') == std::string_view::npos) return std::string(name);
  }
  return std::nullopt;
}

std::optional<FoundSandbox> identify_sandbox(const SandboxRef& ref, const std::optional<std::string>& in_cgroup,
                                             const std::vector<SandboxRecord>& records) {
  if (in_cgroup) {
    // The kernel's word for the container; the record gives its cluster
    // and, once written, which of the cgroup's sandboxes is the current one.
    for (const auto& r : records)
      if (r.container == *in_cgroup)
        return r.ref.pid == 0 || r.ref == ref ? std::optional<FoundSandbox>({r.cluster, r.container, ref})
                                              : std::nullopt;
    return std::nullopt;
  }
  const SandboxRecord* match = nullptr;
  for (const auto& r : records) {
    if (r.ref.pid == 0 || r.ref != ref) continue;
    if (match) return std::nullopt;  // two records of one process: trust neither
    match = &r;
  }
  if (!match) return std::nullopt;
  return FoundSandbox{match->cluster, match->container, ref};
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

Result<uint32_t> LocalBackend::hand_over_to_container(const SandboxSpec& spec, const std::string& dir) {
  if (options_.first_subordinate_id == 0) return 0u;
  EDT_ASSIGN_OR_RETURN(const uint32_t first_id, subordinate_ids(options_.first_subordinate_id, spec.id_range));
  EDT_RETURN_IF_ERROR(hand_over(dir, first_id));
  ::chmod(dir.c_str(), 0700);
  if (spec.slurm) {
    std::lock_guard<std::mutex> lock(cluster_files_mu_);
    EDT_RETURN_IF_ERROR(hand_over(cluster_dir(spec.cluster) + "/munge", first_id));
    if (spec.slurm->controller) EDT_RETURN_IF_ERROR(hand_over(cluster_dir(spec.cluster) + "/slurmctld", first_id));
  }
  const std::string volumes = options_.data_dir + "/volumes/";
  for (const auto& m : spec.mounts) {
    struct stat st {};
    if (m.host_path.starts_with(volumes) && ::lstat(m.host_path.c_str(), &st) == 0 && st.st_uid == 0 &&
        ::lchown(m.host_path.c_str(), first_id, first_id) != 0)
      return io_error("chown " + m.host_path, errno);
  }
  return first_id;
}

std::string LocalBackend::seccomp_path() const { return options_.data_dir + "/seccomp.bpf"; }

std::string LocalBackend::cluster_dir(const std::string& cluster) const {
  return options_.data_dir + "/clusters/" + cluster;
}

std::string LocalBackend::container_dir(const std::string& name) const {
  return options_.data_dir + "/containers/" + name;
}

std::string LocalBackend::container_path(const std::vector<std::string>& tool_path) {
  std::string path;
  for (const auto& p : tool_path) path += p + ":";
  return path + "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
}

Status LocalBackend::prepare_cluster(const std::string& cluster) {
  warm_.keep();
  const std::string dir = cluster_dir(cluster);
  EDT_RETURN_IF_ERROR(make_dirs(dir + "/mpi", 0755));
  EDT_RETURN_IF_ERROR(make_dirs(dir + "/ssh", 0700));
  // id_ed25519: root's login key; host_ca: signs each container's host key.
  for (const char* key : {"id_ed25519", "host_ca"}) {
    const std::string path = dir + "/ssh/" + key;
    if (fs::exists(path) && fs::exists(path + ".pub")) continue;
    fs::remove(path);
    fs::remove(path + ".pub");
    EDT_RETURN_IF_ERROR(run_host_command({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                                          "edt-" + cluster + (key == std::string("host_ca") ? "-host-ca" : ""), "-f",
                                          path})
                            .status()
                            .with_context("make the SSH keys of cluster " + cluster));
  }
  EDT_ASSIGN_OR_RETURN(std::string known_hosts, ssh_known_hosts(cluster));
  return io::replace_file(dir + "/mpi/known_hosts", known_hosts, 0644);
}

Status LocalBackend::make_host_key(const SandboxSpec& spec, const std::string& conf) {
  const std::string key = conf + "/host_ed25519";
  EDT_RETURN_IF_ERROR(
      run_host_command({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", spec.name, "-f", key})
          .status()
          .with_context("make the SSH host key of " + spec.name));
  // A host certificate for the names clients use: the container's name and
  // address (ssh checks the one it was given against these).
  return run_host_command({"/usr/bin/ssh-keygen", "-q", "-s", cluster_dir(spec.cluster) + "/ssh/host_ca", "-I",
                           spec.name, "-h", "-n", spec.name + "," + spec.address, key + ".pub"})
      .status()
      .with_context("sign the SSH host key of " + spec.name);
}

namespace {

// The entries of a container's /etc that are its own: bound over the
// shared links (LocalBackend::etc_links), or a mount point there.
bool own_etc_entry(const std::string& name, bool slurm) {
  return name == "hosts" || name == "hostname" || name == "mpi" || name == "shadow" ||
         (slurm && (name == "slurm" || name == "munge"));  // a Slurm cluster's own, bound there
}

// A container's own directories: /root, /tmp, /var on its disk (`dir`/disk,
// mounted already), and its own files of /etc (hostname, shadow), which
// bwrap_args binds over the shared links.
Status make_own_tree(const SandboxSpec& spec, const std::string& dir) {
  const std::string disk = dir + "/disk";
  for (const char* sub : {"/root/.ssh", "/tmp", "/var/tmp", "/var/log", "/var/lib", "/var/cache", "/var/spool"})
    EDT_RETURN_IF_ERROR(make_dirs(disk + sub, 0755));
  for (const auto& [sub, mode] : {std::pair{"/root", 0700}, {"/root/.ssh", 0700}, {"/tmp", 01777}, {"/var/tmp", 01777}})
    ::chmod((disk + sub).c_str(), mode);
  for (const char* sub : {"/etc", "/conf", "/masked"}) EDT_RETURN_IF_ERROR(make_dirs(dir + sub, 0755));
  ::chmod((dir + "/masked").c_str(), 0555);
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/masked-file", "", 0444));
  std::error_code ec;
  fs::create_symlink("/run", disk + "/var/run", ec);
  fs::create_symlink("/run/lock", disk + "/var/lock", ec);
  if (spec.slurm) EDT_RETURN_IF_ERROR(make_dirs(dir + "/munge-run", 0755));
  const std::string image_etc = (spec.image_root == "/" ? "" : spec.image_root) + "/etc";
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/etc/hostname", spec.name + "\n", 0644));
  return io::write_file(dir + "/etc/shadow", shadow_for(io::read_file(image_etc + "/passwd")), 0600);
}

// Makes in `dir` the links of etc_links(): one to /run/host/etc/NAME for
// each of `names`, and the mount points of the container's own entries.
Status make_etc_links(const std::string& dir, const std::vector<std::string>& names, bool slurm) {
  EDT_RETURN_IF_ERROR(make_dirs(dir + "/mpi", 0755));
  std::error_code ec;
  for (const auto& name : names) {
    fs::create_symlink("/run/host/etc/" + name, dir + "/" + name, ec);
    if (ec) return Status(StatusCode::kIoError, "link " + dir + "/" + name + ": " + ec.message());
  }
  fs::create_symlink("mpi/hosts", dir + "/hosts", ec);
  if (ec) return Status(StatusCode::kIoError, "link " + dir + "/hosts: " + ec.message());
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/hostname", "", 0644));
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/shadow", "", 0600));
  if (slurm) {
    for (const char* sub : {"/slurm", "/munge"}) EDT_RETURN_IF_ERROR(make_dirs(dir + sub, 0755));
  }
  return Status::ok();
}

}  // namespace

Result<std::string> LocalBackend::etc_links(const SandboxSpec& spec) const {
  const std::string image_etc = (spec.image_root == "/" ? "" : spec.image_root) + "/etc";
  const bool slurm = spec.slurm.has_value();
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(image_etc, ec)) {
    std::string name = entry.path().filename();
    std::error_code status_ec;
    if (!own_etc_entry(name, slurm) && world_readable(entry.symlink_status(status_ec)))
      names.push_back(std::move(name));
  }
  if (ec) return Status(StatusCode::kIoError, "read " + image_etc + ": " + ec.message());
  std::sort(names.begin(), names.end());
  std::string listing = image_etc + (slurm ? "\nslurm" : "");
  for (const auto& name : names) listing += "\n" + name;
  char key[17];
  std::snprintf(key, sizeof(key), "%016zx", std::hash<std::string>{}(listing));
  const std::string dir = options_.data_dir + "/etc-links/" + key;
  if (fs::is_directory(dir, ec)) return dir;
  // Made aside, then renamed into place: a container never sees it half
  // made, and two starts that make it at once both end with the same.
  const std::string tmp = dir + ".tmp-" + std::to_string(::gettid());
  fs::remove_all(tmp, ec);
  Status made = make_etc_links(tmp, names, slurm);
  if (made.is_ok() && ::rename(tmp.c_str(), dir.c_str()) != 0 && !fs::is_directory(dir, ec))
    made = io_error("rename " + tmp, errno);
  fs::remove_all(tmp, ec);
  if (!made.is_ok()) return made;
  return dir;
}

std::string LocalBackend::disk_image(const std::string& name) const { return container_dir(name) + ".disk"; }

Status LocalBackend::release_container_disk(const std::string& name) {
  return remove_bounded_disk(disk_image(name), container_dir(name) + "/disk");
}

Status LocalBackend::make_container_disk(const SandboxSpec& spec, const std::string& dir) {
  EDT_RETURN_IF_ERROR(make_dirs(dir, 0755));  // and containers/, where the disk's file goes
  if (options_.container_disk.bytes == 0) return make_dirs(dir + "/disk", 0755);
  return make_bounded_disk(disk_image(spec.name), dir + "/disk", options_.container_disk)
      .with_context("bound what container " + spec.name + " writes (--container-disk)");
}

Status LocalBackend::make_container_dir(const SandboxSpec& spec, const std::string& dir) {
  const std::string keys = cluster_dir(spec.cluster) + "/ssh/";
  EDT_RETURN_IF_ERROR(make_container_disk(spec, dir));
  EDT_RETURN_IF_ERROR(make_own_tree(spec, dir));

  // SSH: the cluster's key pair for root, a client that binds the
  // container's address and checks host keys against the cluster's CA, and
  // sshd on that address with a host key and certificate of its own.
  const std::string ssh = dir + "/disk/root/.ssh/";
  EDT_RETURN_IF_ERROR(io::write_file(ssh + "id_ed25519", io::read_file(keys + "id_ed25519"), 0600));
  EDT_RETURN_IF_ERROR(io::write_file(ssh + "id_ed25519.pub", io::read_file(keys + "id_ed25519.pub"), 0644));
  EDT_RETURN_IF_ERROR(io::write_file(ssh + "authorized_keys", io::read_file(keys + "id_ed25519.pub"), 0600));
  const std::string port = std::to_string(options_.ssh_port);
  EDT_RETURN_IF_ERROR(io::write_file(ssh + "config",
                                 "Host *\n  Port " + port + "\n  BindAddress " + spec.address +
                                     "\n  IdentityFile /root/.ssh/id_ed25519\n  StrictHostKeyChecking yes\n"
                                     "  UserKnownHostsFile " + std::string(kKnownHostsInContainer) +
                                     "\n  LogLevel ERROR\n",
                                 0600));
  EDT_RETURN_IF_ERROR(make_host_key(spec, dir + "/conf"));
  std::string set_env;
  for (const auto& [key, value] : spec.env) set_env += " " + quote_env(key, value);
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/conf/sshd_config",
                                 "ListenAddress " + spec.address + ":" + port +
                                     "\nHostKey /run/edt/host_ed25519\nHostCertificate /run/edt/host_ed25519-cert.pub\n"
                                     "PermitRootLogin prohibit-password\n"
                                     "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                                     "PidFile none\nPrintMotd no\nAcceptEnv LANG LC_*\nMaxStartups 100:30:200\n"
                                     "SetEnv" + set_env + "\n",
                                 0600));
  // For the warm interpreter (on the host only): the cluster, and the
  // environment a session in this container gets.
  return io::write_file(dir + "/session.json", nlohmann::json{{"cluster", spec.cluster}, {"env", spec.env}}.dump(), 0600);
}

std::vector<SandboxMount> LocalBackend::shared_binds(const SandboxSpec& spec) const {
  std::vector<SandboxMount> binds;
  for (const auto& tree : options_.tool_binds) binds.push_back({tree, tree, true});
  binds.insert(binds.end(), spec.mounts.begin(), spec.mounts.end());
  return binds;
}

std::vector<std::string> LocalBackend::bwrap_args(const SandboxSpec& spec, const std::string& dir,
                                                  const std::string& etc,
                                                  const std::vector<SandboxMount>& shared) const {
  const std::string root = spec.image_root == "/" ? "" : spec.image_root;
  std::vector<std::string> a = {"/usr/bin/bwrap", "--info-fd", "3", "--seccomp", "4", "--unshare-uts",
                                "--unshare-pid", "--unshare-ipc", "--hostname", spec.name, "--cap-drop", "ALL"};
  for (const auto& cap : kept_capabilities()) a.insert(a.end(), {"--cap-add", cap});
  // Bridge mode: start() gives the namespace its interface, then writes fd 5.
  if (network_) a.insert(a.end(), {"--unshare-net", "--block-fd", "5"});
  a.insert(a.end(), {"--ro-bind", root + "/usr", "/usr"});
  for (const char* top : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    const std::string host = root + "/" + top;
    std::error_code ec;
    if (fs::is_symlink(host, ec)) {
      a.insert(a.end(), {"--symlink", fs::read_symlink(host, ec).string(), std::string("/") + top});
    } else if (fs::is_directory(host, ec)) {
      a.insert(a.end(), {"--ro-bind", host, std::string("/") + top});
    }
  }
  a.insert(a.end(), {"--ro-bind", root + "/etc", "/run/host/etc"});
  for (const auto& [path, is_dir] : unreadable_entries(root + "/etc"))
    a.insert(a.end(), {"--ro-bind", dir + (is_dir ? "/masked" : "/masked-file"), "/run/host/etc/" + path});
  a.insert(a.end(), {"--ro-bind", etc, "/etc", "--ro-bind", dir + "/etc/hostname", "/etc/hostname", "--ro-bind",
                     dir + "/etc/shadow", "/etc/shadow", "--ro-bind", cluster_dir(spec.cluster) + "/mpi", "/etc/mpi",
                     "--bind", dir + "/disk/var", "/var",
                     "--bind", dir + "/disk/root", "/root", "--bind", dir + "/disk/tmp", "/tmp", "--dev", "/dev",
                     "--proc", "/proc", "--ro-bind", "/sys", "/sys", "--size", std::to_string(spec.shm_bytes), "--tmpfs", "/dev/shm",
                     "--dir", "/run/sshd", "--ro-bind", dir + "/conf", "/run/edt"});
  if (spec.job_dir) a.insert(a.end(), {"--ro-bind", cluster_dir(spec.cluster) + "/mpi", "/job"});
  for (int gpu : spec.gpus) {
    const std::string device = "/dev/nvidia" + std::to_string(gpu);
    std::error_code ec;
    a.insert(a.end(), {"--dev-bind", fs::exists(device, ec) ? device : "/dev/null", device});
  }
  if (spec.slurm) {
    const std::string cluster = cluster_dir(spec.cluster);
    a.insert(a.end(), {"--ro-bind", cluster + "/slurm", "/etc/slurm", "--ro-bind", dir + "/conf/gres.conf",
                       "/etc/slurm/gres.conf", "--ro-bind", cluster + "/munge", "/etc/munge", "--bind",
                       dir + "/munge-run", "/run/munge"});
    if (spec.slurm->controller) a.insert(a.end(), {"--bind", cluster + "/slurmctld", "/var/spool/slurmctld"});
  }
  if (std::error_code ec; !warm_.socket_dir().empty() && fs::is_directory(warm_.socket_dir(), ec))
    a.insert(a.end(), {"--ro-bind", warm_.socket_dir(), "/run/edt-warm"});
  for (const auto& m : shared) a.insert(a.end(), {m.read_only ? "--ro-bind" : "--bind", m.host_path, m.path});
  a.insert(a.end(), {"--remount-ro", "/", "--chdir", "/root"});
  // Bridge mode: bwrap also goes on when edtd dies before writing fd 5 (an
  // EOF), and sshd would listen on an address the namespace lacks; so sshd
  // starts only once eth0 has its default route, edtd's last step.
  if (network_)
    a.insert(a.end(), {"/bin/sh", "-c",
                       "while read -r dev dst rest; do [ \"$dev $dst\" = 'eth0 00000000' ] && exec \"$@\"; "
                       "done < /proc/net/route; echo 'edt: eth0 was not configured' >&2; exit 1",
                       "sh"});
  if (spec.slurm) {
    // munged, slurmctld (the launcher) and slurmd daemonize; sshd then
    // starts as in any container. A daemon that fails to start ends the
    // container, and its error is in the container's log.
    a.insert(a.end(),
             {"/bin/sh", "-c",
              "set -e; conf=$1; controller=$2; name=$3; address=$4; shift 4\n"
              "mkdir -p -m 0700 /var/lib/munge /var/log/munge\n"
              "mkdir -p /var/log/slurm /var/spool/slurmd /var/spool/slurmctld\n"
              "munged --force\n"
              "daemons=/etc/slurm/slurm-daemons.conf\n"
              "if [ \"$controller\" = 1 ]; then slurmctld -f $daemons; fi\n"
              "slurmd -f $daemons -Z ${conf:+--conf \"$conf\"}\n"
              // The node registered from 127.0.0.1 in loopback mode (see
              // control/model/slurm.h); it is reached at its own address.
              "i=0; until scontrol update NodeName=$name NodeAddr=$address 2>/dev/null; do\n"
              "  i=$((i+1)); [ $i -lt 600 ] || { echo \"edt: slurmd of $name did not register with slurmctld "
              "within 60 s; see /var/log/slurm in it and in the launcher\" >&2; exit 1; }\n"
              "  sleep 0.1\n"
              "done\n"
              // In the launcher: a container that leaves the hostfile
              // (edtd takes it out before it stops it: scale-down, or a
              // restart) leaves Slurm too: its node goes DOWN (its batch
              // jobs are requeued, its steps end) and is deleted. A new
              // container is in the hostfile once Running, after its node
              // registered; so only a node seen in it is removed.
              "if [ \"$controller\" = 1 ]; then (set +e; seen=''; gone=''\n"
              "  while :; do\n"
              "    now=\" $(cut -d' ' -f1 /etc/mpi/hostfile | tr '\\n' ' ')\"\n"
              "    for n in $seen; do case \"$now\" in *\" $n \"*) ;; *) gone=\"$gone $n\";; esac; done\n"
              "    left=''\n"
              "    for n in $gone; do\n"
              "      case \"$now\" in *\" $n \"*) continue;; esac\n"
              "      scontrol show node $n >/dev/null 2>&1 || continue\n"
              "      scontrol update NodeName=$n State=DOWN Reason='edt: its container left the cluster'\n"
              "      scontrol delete NodeName=$n && echo \"$(date -Is) node $n left\" || left=\"$left $n\"\n"
              "    done\n"
              "    gone=$left; seen=$now\n"
              "    sleep 0.5\n"
              "  done) </dev/null >>/var/log/slurm/edt-nodes.log 2>&1 &\n"
              "fi\n"
              "exec \"$@\"",
              "edt-slurm", spec.slurm->node_conf, spec.slurm->controller ? "1" : "0", spec.name, spec.address});
  }
  a.insert(a.end(), {"/usr/sbin/sshd", "-D", "-e", "-f", "/run/edt/sshd_config"});
  return a;
}

Status LocalBackend::write_slurm_files(const SandboxSpec& spec, const std::string& dir) {
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/conf/gres.conf", spec.slurm->gres_conf, 0644));
  const std::string cluster = cluster_dir(spec.cluster);
  std::lock_guard<std::mutex> lock(cluster_files_mu_);
  EDT_RETURN_IF_ERROR(make_dirs(cluster + "/slurm", 0755));
  EDT_RETURN_IF_ERROR(io::replace_file(cluster + "/slurm/slurm.conf", spec.slurm->slurm_conf, 0644));
  EDT_RETURN_IF_ERROR(io::replace_file(cluster + "/slurm/slurm-daemons.conf", spec.slurm->daemons_conf, 0644));
  EDT_RETURN_IF_ERROR(io::replace_file(cluster + "/slurm/cgroup.conf", spec.slurm->cgroup_conf, 0644));
  // Where each container's own gres.conf is bound.
  EDT_RETURN_IF_ERROR(io::replace_file(cluster + "/slurm/gres.conf", "", 0644));
  // slurmctld's state (StateSaveLocation), the cluster's: a launcher that
  // restarts finds its jobs again.
  if (spec.slurm->controller) EDT_RETURN_IF_ERROR(make_dirs(cluster + "/slurmctld", 0700));
  // The cluster's munge key: made once, readable by the containers' root
  // only, and bound into this cluster's containers alone.
  EDT_RETURN_IF_ERROR(make_dirs(cluster + "/munge", 0700));
  const std::string key = cluster + "/munge/munge.key";
  if (std::error_code ec; fs::exists(key, ec)) return Status::ok();
  std::string bytes(1024, '\0');
  std::ifstream random("/dev/urandom", std::ios::binary);
  if (!random.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    return internal_error("read /dev/urandom for the munge key of cluster " + spec.cluster);
  return io::replace_file(key, bytes, 0400);
}

Status LocalBackend::attach_network(const SandboxSpec& spec, const SandboxRef& ref, int release) {
  Status st = network_->attach(spec.cluster, spec.name, spec.address, static_cast<pid_t>(ref.pid));
  if (st.is_ok() && ::write(release, "1", 1) != 1) st = io_error("release the sandbox of " + spec.name, errno);
  if (!st.is_ok()) ::kill(static_cast<pid_t>(ref.pid), SIGKILL);
  return st;
}

Result<SandboxRef> LocalBackend::start(const SandboxSpec& spec) {
  const std::string dir = container_dir(spec.name);
  // A container directory left from an earlier try is stale: start clean
  // (its disk unmounted first, or remove_all stops there).
  std::error_code ec;
  if (Status st = release_container_disk(spec.name); !st.is_ok())
    return st.with_context("start container " + spec.name);
  fs::remove_all(dir, ec);
  auto fail = [&](Status status) -> Result<SandboxRef> {
    fs::remove_all(dir, ec);
    return status.with_context("start container " + spec.name);
  };
  if (Status st = make_container_dir(spec, dir); !st.is_ok()) return fail(st);
  if (spec.slurm) {
    if (Status st = write_slurm_files(spec, dir); !st.is_ok()) return fail(st);
  }
  auto first_id = hand_over_to_container(spec, dir);
  if (!first_id.is_ok()) return fail(first_id.status());
  fault_point("start.before_spawn");
  const std::string info_path = dir + "/info.json";
  const std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", std::string(kLabelHome) + "=" + home_,
                                        std::string(kLabelCluster) + "=" + spec.cluster,
                                        std::string(kLabelContainer) + "=" + spec.name};
  if (!seccomp_.is_ok()) return fail(seccomp_.status());
  // What edtd started here, before the sandbox exists (its pid follows).
  if (Status st = write_record({spec.cluster, spec.name, {}}, dir); !st.is_ok()) return fail(st);
  auto cgroups = cgroups_.make(spec.name, {options_.pids_max, spec.memory_bytes, spec.cpu_millis});
  if (!cgroups.is_ok()) return fail(cgroups.status());
  Pipe block;  // bridge mode: holds the sandbox until its interface is up
  if (network_ && pipe2(block.fds, O_CLOEXEC) != 0) return fail(io_error("pipe", errno));
  auto etc = etc_links(spec);
  if (!etc.is_ok()) return fail(etc.status());
  std::vector<SandboxMount> shared = shared_binds(spec);
  if (Status st = sources_exist(shared); !st.is_ok()) return fail(st);
  Result<StagedBinds> staged = *first_id != 0 ? stage_sources(shared, dir) : StagedBinds{};
  if (!staged.is_ok()) return fail(staged.status());
  Pipe out;  // the sandbox's stdout and stderr, read by its log writer alone
  if (pipe2(out.fds, O_CLOEXEC) != 0) return fail(io_error("pipe", errno));
  Spawn log_writer;
  log_writer.argv = {options_.enter_program, kContainerLogCommand, dir};
  log_writer.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  log_writer.in_fd = out.fds[0];
  log_writer.cgroup_procs = *cgroups;
  auto writer = spawn_detached(log_writer);
  out.close_end(0);
  if (!writer.is_ok()) return fail(writer.status().with_context("start the container's log writer"));
  const SandboxRef writer_ref = proc::identify(*writer).value_or(SandboxRef{*writer, 0});
  auto monitor = spawn_detached({.argv = bwrap_args(spec, dir, *etc, shared),
                                 .env = env,
                                 .log_path = {},
                                 .out_fd = out.fds[1],
                                 .in_fd = -1,
                                 .fd3_path = info_path,
                                 .fd4_path = seccomp_path(),
                                 .fd5 = block.fds[0],
                                 .cgroup_procs = *cgroups,
                                 .first_id = *first_id,
                                 .staged_binds = *staged});
  block.close_end(0);
  out.close_end(1);
  if (!monitor.is_ok()) return fail(with_last_words(monitor.status(), dir, writer_ref));
  fault_point("start.spawned");
  // bwrap writes the pid of the sandbox's init to its info fd once the
  // namespaces exist; that is the pid edtd keeps.
  for (int i = 0; i < 400; ++i) {
    std::string info = io::read_file(info_path);
    auto parsed = nlohmann::json::parse(info, nullptr, false);
    if (!parsed.is_discarded() && parsed.contains("child-pid")) {
      auto ref = parsed["child-pid"].is_number_integer() ? proc::identify(parsed["child-pid"].get<int64_t>())
                                                         : std::nullopt;
      if (ref) {
        if (Status st = write_record({spec.cluster, spec.name, *ref}, dir); !st.is_ok()) {
          ::kill(static_cast<pid_t>(ref->pid), SIGKILL);
          return fail(st);
        }
      }
      if (ref && network_) {
        if (Status st = attach_network(spec, *ref, block.fds[1]); !st.is_ok())
          return fail(with_last_words(st, dir, writer_ref));
      }
      if (ref) return *ref;
      break;
    }
    auto monitor_stat = proc::read_stat(*monitor);
    if (!monitor_stat || monitor_stat->zombie()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(static_cast<pid_t>(*monitor), SIGKILL);
  const std::string log = last_words(dir, writer_ref);
  return fail(internal_error("bubblewrap did not start: " + (log.empty() ? "no output" : log)));
}

bool LocalBackend::sandbox_ready(const std::string& dir) {
  struct stat st {};
  if (::stat((dir + "/ready").c_str(), &st) == 0) return st.st_size > 0;
  // A sandbox started before the log writer: sshd's line is near the start
  // of its log; a bounded head of it, never the whole file.
  const int fd = ::open((dir + "/log").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  std::string head(64 * 1024, '\0');
  const ssize_t n = ::pread(fd, head.data(), head.size(), 0);
  ::close(fd);
  return n > 0 && head.substr(0, static_cast<size_t>(n)).find(kReadyLine) != std::string::npos;
}

SandboxState LocalBackend::observe(const std::string& name, const SandboxRef& ref) {
  if (!proc::alive(ref)) return SandboxState::kGone;
  // The log writer marks `ready` once sshd -e says it listens: one stat.
  return sandbox_ready(container_dir(name)) ? SandboxState::kReady : SandboxState::kStarting;
}

Status LocalBackend::signal(const SandboxRef& ref, int sig) {
  if (!proc::alive(ref)) return Status::ok();
  if (sig == SIGKILL) {
    // Killing a PID namespace's init kills every process in it.
    if (::kill(static_cast<pid_t>(ref.pid), SIGKILL) != 0 && errno != ESRCH) return io_error("kill", errno);
    return Status::ok();
  }
  for (pid_t pid : processes_in_namespace(static_cast<pid_t>(ref.pid))) ::kill(pid, sig);
  return Status::ok();
}

// A worker is told by the environment it started with (/proc/<pid>/environ,
// NUL-separated; readable by edtd, which owns the container's user
// namespace). A process that exits meanwhile, or a zombie, reads as empty.
Result<int> LocalBackend::training_processes(const SandboxRef& ref) {
  if (!proc::alive(ref)) return 0;
  static constexpr std::string_view kVariable{"\0EDT_COORDINATOR=", 17};
  int count = 0;
  for (pid_t pid : processes_in_namespace(static_cast<pid_t>(ref.pid))) {
    const std::string env = '\0' + io::read_file("/proc/" + std::to_string(pid) + "/environ");
    if (env.find(kVariable) != std::string::npos) ++count;
  }
  return count;
}

std::vector<SandboxRecord> LocalBackend::sandbox_records() const {
  std::vector<SandboxRecord> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.data_dir + "/containers", ec))
    if (auto record = read_record(entry.path().string()); record && record->container == entry.path().filename())
      out.push_back(std::move(*record));
  return out;
}

Result<std::vector<FoundSandbox>> LocalBackend::running_sandboxes() {
  // The label finds the candidates; which container each is, edtd's
  // records and the kernel's cgroups say (local_backend.h).
  const std::vector<SandboxRecord> records = sandbox_records();
  const std::string parent = "edt-" + cgroup_key(home_);
  std::vector<FoundSandbox> out;
  for (const auto& p : labelled_processes(home_)) {
    if (!p.init) continue;
    const SandboxRef ref{p.pid, p.stat.start_time};
    const auto found =
        identify_sandbox(ref, cgroup_container(io::read_file("/proc/" + std::to_string(p.pid) + "/cgroup"), parent),
                         records);
    if (found) {
      out.push_back(*found);
    } else {
      log::warn("the sandbox of pid {} (labelled {}/{}) is no container edtd recorded: it is not adopted", p.pid,
                p.cluster, p.name);
    }
  }
  return out;
}

Result<int> LocalBackend::end_sandboxes_except(const std::vector<SandboxRef>& keep) {
  std::set<pid_t> ended;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (true) {
    const std::vector<pid_t> strays = stray_processes(labelled_processes(home_), keep);
    if (strays.empty()) return static_cast<int>(ended.size());
    if (std::chrono::steady_clock::now() > deadline) {
      std::string pids;
      for (pid_t pid : strays) pids += " " + std::to_string(pid);
      return internal_error("stray sandbox processes did not end within 10 s of SIGKILL:" + pids);
    }
    for (pid_t pid : strays)
      if (::kill(pid, SIGKILL) == 0) ended.insert(pid);
    // A killed sandbox's init lingers until its namespace is empty.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Status LocalBackend::remove(const std::string& name) {
  // Its PID namespace ended, so its processes are gone or on their way out.
  if (Status st = cgroups_.remove(name); !st.is_ok()) log::warn("{}", st.message());
  // Its disk first: unmounted, the directory below is empty.
  EDT_RETURN_IF_ERROR(release_container_disk(name));
  std::error_code ec;
  fs::remove_all(container_dir(name), ec);
  if (ec) return Status(StatusCode::kIoError, "remove " + container_dir(name) + ": " + ec.message());
  return network_ ? network_->forget() : Status::ok();
}

Status LocalBackend::write_cluster_files(const std::string& cluster, const ClusterFiles& files) {
  const std::string mpi = cluster_dir(cluster) + "/mpi/";
  EDT_RETURN_IF_ERROR(io::replace_file(mpi + "hosts", files.hosts, 0644));
  EDT_RETURN_IF_ERROR(io::replace_file(mpi + "hostfile", files.hostfile, 0644));
  EDT_RETURN_IF_ERROR(io::replace_file(mpi + "hostnames", files.hostnames, 0644));
  EDT_RETURN_IF_ERROR(io::replace_file(mpi + "discover_hosts.sh",
                                        "#!/bin/sh\n# The Running containers of cluster " + cluster +
                                            ", as name:slots.\ncat <<'EOF'\n" + files.discover + "EOF\n",
                                        0755));
  return Status::ok();
}

Status LocalBackend::remove_cluster(const std::string& cluster) {
  std::error_code ec;
  fs::remove_all(cluster_dir(cluster), ec);
  if (ec) return Status(StatusCode::kIoError, "remove " + cluster_dir(cluster) + ": " + ec.message());
  return Status::ok();
}

Result<std::vector<std::string>> LocalBackend::enter_command(const SandboxRef& container) {
  if (!proc::alive(container)) return failed_precondition("the container is not running");
  return std::vector<std::string>{options_.enter_program, kEnterContainerCommand,
                                  std::to_string(container.pid) + ":" + std::to_string(container.start_time)};
}

Result<SandboxRef> LocalBackend::exec(const SandboxRef& container, const ExecSpec& spec) {
  EDT_ASSIGN_OR_RETURN(std::vector<std::string> enter, enter_command(container));
  // A host-side shell waits for the command and records its exit code
  // (write, then rename), so a restarted edtd can still learn it.
  std::vector<std::string> argv = {"/bin/sh", "-c", "f=$1; shift; \"$@\"; echo $? > \"$f.tmp\"; mv \"$f.tmp\" \"$f\"",
                                   "edt-job", spec.exit_path};
  argv.insert(argv.end(), enter.begin(), enter.end());
  argv.insert(argv.end(), {"--", "/usr/bin/env", "-i", "-C", "/root"});
  for (const auto& [key, value] : spec.env) argv.push_back(key + "=" + value);
  argv.insert(argv.end(), {"/bin/bash", "-c", spec.command});
  Spawn job;
  job.argv = std::move(argv);
  job.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  job.log_path = spec.log_path;
  EDT_ASSIGN_OR_RETURN(int64_t pid, spawn_detached(job));
  // The wrapper may already have ended (a short command): then it is known by
  // its pid alone, and alive() says it is gone.
  return proc::identify(pid).value_or(SandboxRef{pid, 0});
}

Result<std::string> LocalBackend::ssh_private_key(const std::string& cluster) {
  std::string key = io::read_file(cluster_dir(cluster) + "/ssh/id_ed25519");
  if (key.empty()) return not_found("cluster " + cluster + " has no SSH key yet");
  return key;
}

Result<std::string> LocalBackend::ssh_known_hosts(const std::string& cluster) {
  const std::string keys = cluster_dir(cluster) + "/ssh/";
  std::string ca = io::read_file(keys + "host_ca.pub");
  if (ca.empty()) return not_found("cluster " + cluster + " has no SSH host CA yet");
  if (ca.back() != '\n') ca += '\n';
  std::string known = "@cert-authority * " + ca;
  // A cluster made before host certificates: its running containers still
  // present the one host key they shared.
  if (std::string shared = io::read_file(keys + "host_ed25519.pub"); !shared.empty())
    known += "* " + shared + (shared.back() == '\n' ? "" : "\n");
  return known;
}

}  // namespace edt::control
