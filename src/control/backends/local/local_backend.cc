#include "control/backends/local/local_backend.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/io.h"
#include "common/log.h"
#include "common/process.h"
#include "control/backends/fault_points.h"
#include "control/backends/local/bwrap_args.h"
#include "control/backends/local/container_fs.h"
#include "control/backends/local/container_log.h"
#include "control/backends/local/enter.h"
#include "control/backends/local/host_command.h"
#include "control/backends/local/proc_scan.h"
#include "control/backends/local/sandbox_policy.h"
#include "control/backends/local/sandbox_process.h"
#include "control/backends/local/sandbox_record.h"
#include "control/backends/local/slurm_files.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

WarmInterpreterOptions with_seccomp(WarmInterpreterOptions options, const std::string& path) {
  options.seccomp_path = path;
  return options;
}

// The environment of bwrap's monitor and the sandbox's init: a PATH and
// the label (proc_scan.h).
std::vector<std::string> sandbox_env(const std::string& home, const SandboxSpec& spec) {
  return {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", std::string(kLabelHome) + "=" + home,
          std::string(kLabelCluster) + "=" + spec.cluster, std::string(kLabelContainer) + "=" + spec.name};
}

// Where bwrap writes the sandbox's init (its --info-fd), in the container's directory.
constexpr const char* kInfoFile = "/info.json";

// Whether the sandbox whose init is `init` ended on its own: then a network
// step that failed for want of its process (`ip`: No such process) failed
// because of it. A sandbox that lives waits on its block fd, so a short
// wait tells the two apart.
bool ended_on_its_own(const SandboxRef& init) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (proc::alive(init)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// How bubblewrap's `monitor` ended ("it exited with status 1"), reaped here
// when this process is its parent (a Slurm node's helper is the subreaper
// of what it starts), waiting at most 1 s; "" when another process reaps it.
std::string monitor_end(int64_t monitor) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (true) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(monitor), &info, WEXITED | WNOHANG) != 0) return "";
    if (info.si_pid != 0)
      return (info.si_code == CLD_EXITED ? "it exited with status " : "it was killed by signal ") +
             std::to_string(info.si_status);
    if (std::chrono::steady_clock::now() > deadline) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// A sandbox that did not start: its cause is what bubblewrap said (the
// log) and how it ended, not a later step that found it gone; `when` names
// that step ("before its network was attached"), if any.
Status sandbox_failed(int64_t monitor, const std::string& dir, const SandboxRef& writer, const std::string& when) {
  std::string how = monitor_end(monitor);
  if (!when.empty()) how += (how.empty() ? "it ended " : ", ") + when;
  std::string log = last_words(dir, writer);
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return internal_error("bubblewrap did not start" + (how.empty() ? "" : " (" + how + ")") + ": " +
                        (log.empty() ? "no output" : log));
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
  if (auto tools = make_tool_bundle(options_.data_dir); tools.is_ok())
    tools_ = *tools;
  else
    log::warn("containers of images other than the host's run the image's own sshd: {}", tools.status().message());
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
  if (options_.first_subordinate_id != 0) {
    for (const char* sub : {"", "/containers", "/clusters", "/volumes"}) {
      fs::create_directories(options_.data_dir + sub, ec);
      ::chmod((options_.data_dir + sub).c_str(), data_dir_mode(options_.first_subordinate_id));
    }
  }
}

Result<uint32_t> LocalBackend::hand_over_to_container(const SandboxSpec& spec, const std::string& dir) {
  if (options_.first_subordinate_id == 0) return 0u;
  EDT_ASSIGN_OR_RETURN(const uint32_t first_id, subordinate_ids(options_.first_subordinate_id, spec.id_range));
  EDT_RETURN_IF_ERROR(hand_over(dir, first_id, first_id));
  ::chmod(dir.c_str(), 0700);
  if (spec.slurm) {
    std::lock_guard<std::mutex> lock(cluster_files_mu_);
    EDT_RETURN_IF_ERROR(hand_over(cluster_dir(spec.cluster) + "/munge", first_id, first_id));
    if (spec.slurm->controller) EDT_RETURN_IF_ERROR(hand_over(cluster_dir(spec.cluster) + "/slurmctld", first_id, first_id));
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
  // edt's ssh last (tool_bundle.h): an image's own comes first.
  return path + "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + std::string(kToolsInContainer) + "/bin";
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
  EDT_RETURN_IF_ERROR(make_container_disk(spec, dir));
  EDT_RETURN_IF_ERROR(make_own_tree(spec, dir));
  // SSH: the cluster's key pair for root, a client that binds the
  // container's address and checks host keys against the cluster's CA, and
  // sshd on that address with a host key and certificate of its own.
  EDT_RETURN_IF_ERROR(write_ssh_config(spec, dir, cluster_dir(spec.cluster) + "/ssh/", options_.ssh_port));
  EDT_RETURN_IF_ERROR(write_login_profile(spec, dir));
  EDT_RETURN_IF_ERROR(make_host_key(spec, dir + "/conf"));
  // For the warm interpreter (on the host only): the cluster, and the
  // environment a session in this container gets.
  return io::write_file(dir + "/session.json", nlohmann::json{{"cluster", spec.cluster}, {"env", spec.env}}.dump(), 0600);
}

std::optional<ToolBundle> LocalBackend::tools_for(const SandboxSpec& spec) const {
  return spec.image_root == "/" ? std::nullopt : tools_;
}

std::vector<SandboxMount> LocalBackend::shared_binds(const SandboxSpec& spec) const {
  std::vector<SandboxMount> binds = options_.tool_binds;
  if (auto tools = tools_for(spec)) binds.push_back({tools->dir, std::string(kToolsInContainer), true});
  binds.insert(binds.end(), spec.mounts.begin(), spec.mounts.end());
  return binds;
}

Status LocalBackend::write_slurm_files(const SandboxSpec& spec, const std::string& dir) {
  EDT_RETURN_IF_ERROR(write_container_slurm_files(spec, dir));
  std::lock_guard<std::mutex> lock(cluster_files_mu_);
  return write_cluster_slurm_files(spec, cluster_dir(spec.cluster));
}

Status LocalBackend::attach_network(const SandboxSpec& spec, const SandboxRef& ref, int release) {
  Status st = network_->attach(spec.cluster, spec.name, spec.address, static_cast<pid_t>(ref.pid));
  if (st.is_ok() && ::write(release, "1", 1) != 1) st = io_error("release the sandbox of " + spec.name, errno);
  return st;
}

namespace {

// `env` with the HOME and USER of `login` where it is not root (root's are
// container_env()'s).
void set_login_env(const ContainerUser& login, std::map<std::string, std::string>& env) {
  if (login.root()) return;
  env["HOME"] = login.home;
  env["USER"] = login.name;
}

// The spec with its login user resolved (image_login), whose HOME and
// USER every session and job sees.
Result<SandboxSpec> with_login(const SandboxSpec& requested) {
  SandboxSpec spec = requested;
  EDT_ASSIGN_OR_RETURN(spec.login, image_login(spec));
  set_login_env(spec.login, spec.env);
  return spec;
}

}  // namespace

Result<SandboxRef> LocalBackend::start(const SandboxSpec& requested) {
  auto resolved = with_login(requested);
  if (!resolved.is_ok()) return resolved.status().with_context("start container " + requested.name);
  const SandboxSpec& spec = *resolved;
  const std::string dir = container_dir(spec.name);
  // A container directory left from an earlier try is stale: start clean
  // (its disk unmounted first, or remove_all stops there).
  std::error_code ec;
  if (Status st = release_container_disk(spec.name); !st.is_ok())
    return st.with_context("start container " + spec.name);
  fs::remove_all(dir, ec);
  Result<SandboxRef> started = start_in(spec, dir);
  if (started.is_ok()) return started;
  fs::remove_all(dir, ec);
  return started.status().with_context("start container " + spec.name);
}

Result<uint32_t> LocalBackend::make_sandbox_files(const SandboxSpec& spec, const std::string& dir) {
  EDT_RETURN_IF_ERROR(make_container_dir(spec, dir));
  if (spec.slurm) EDT_RETURN_IF_ERROR(write_slurm_files(spec, dir));
  EDT_ASSIGN_OR_RETURN(const uint32_t first_id, hand_over_to_container(spec, dir));
  EDT_RETURN_IF_ERROR(give_home(spec, dir, first_id));
  return first_id;
}

Result<SandboxRef> LocalBackend::start_in(const SandboxSpec& spec, const std::string& dir) {
  EDT_ASSIGN_OR_RETURN(const uint32_t first_id, make_sandbox_files(spec, dir));
  fault_point("start.before_spawn");
  if (!seccomp_.is_ok()) return seccomp_.status();
  // What edtd started here, before the sandbox exists (its pid follows).
  EDT_RETURN_IF_ERROR(write_record({spec.cluster, spec.name, {}}, dir));
  EDT_ASSIGN_OR_RETURN(const std::vector<std::string> cgroups,
                       cgroups_.make(spec.name, {options_.pids_max, spec.memory_bytes, spec.cpu_millis}));
  Pipe block;  // bridge mode: holds the sandbox until its interface is up
  if (network_ && pipe2(block.fds, O_CLOEXEC) != 0) return io_error("pipe", errno);
  EDT_ASSIGN_OR_RETURN(const std::string etc, etc_links(spec, options_.data_dir));
  std::vector<SandboxMount> shared = shared_binds(spec);
  EDT_RETURN_IF_ERROR(sources_exist(shared));
  Result<StagedBinds> staged = first_id != 0 ? stage_sources(shared, dir) : StagedBinds{};
  if (!staged.is_ok()) return staged.status();
  Pipe out;  // the sandbox's stdout and stderr, read by its log writer alone
  if (pipe2(out.fds, O_CLOEXEC) != 0) return io_error("pipe", errno);
  EDT_ASSIGN_OR_RETURN(const SandboxRef writer, start_log_writer(dir, out, cgroups));
  const BwrapLayout layout{dir, etc, cluster_dir(spec.cluster), warm_.socket_dir(), network_ != nullptr, tools_for(spec)};
  auto monitor = spawn_detached({.argv = bwrap_args(spec, layout, shared),
                                 .env = sandbox_env(home_, spec),
                                 .log_path = {},
                                 .out_fd = out.fds[1],
                                 .in_fd = -1,
                                 .fd3_path = dir + kInfoFile,
                                 .fd4_path = seccomp_path(),
                                 .fd5 = block.fds[0],
                                 .cgroup_procs = cgroups,
                                 .first_id = first_id,
                                 .staged_binds = *staged});
  block.close_end(0);
  out.close_end(1);
  if (!monitor.is_ok()) return with_last_words(monitor.status(), dir, writer);
  fault_point("start.spawned");
  return await_init(spec, dir, *monitor, writer, block.fds[1]);
}

Result<SandboxRef> LocalBackend::start_log_writer(const std::string& dir, Pipe& out,
                                                  const std::vector<std::string>& cgroups) {
  Spawn log_writer;
  log_writer.argv = {options_.enter_program, kContainerLogCommand, dir};
  log_writer.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  log_writer.in_fd = out.fds[0];
  log_writer.cgroup_procs = cgroups;
  auto writer = spawn_detached(log_writer);
  out.close_end(0);
  if (!writer.is_ok()) return writer.status().with_context("start the container's log writer");
  return proc::identify(*writer).value_or(SandboxRef{*writer, 0});
}

Result<SandboxRef> LocalBackend::await_init(const SandboxSpec& spec, const std::string& dir, int64_t monitor,
                                            const SandboxRef& writer, int release) {
  for (int i = 0; i < 400; ++i) {
    auto parsed = nlohmann::json::parse(io::read_file(dir + kInfoFile), nullptr, false);
    if (!parsed.is_discarded() && parsed.contains("child-pid")) {
      auto ref = parsed["child-pid"].is_number_integer() ? proc::identify(parsed["child-pid"].get<int64_t>())
                                                         : std::nullopt;
      if (!ref) break;
      if (Status st = write_record({spec.cluster, spec.name, *ref}, dir); !st.is_ok()) {
        ::kill(static_cast<pid_t>(ref->pid), SIGKILL);
        return st;
      }
      if (Status st = network_ ? attach_network(spec, *ref, release) : Status::ok(); !st.is_ok()) {
        if (ended_on_its_own(*ref)) return sandbox_failed(monitor, dir, writer, "before its network was attached");
        ::kill(static_cast<pid_t>(ref->pid), SIGKILL);
        return with_last_words(st, dir, writer);
      }
      return *ref;
    }
    auto monitor_stat = proc::read_stat(monitor);
    if (!monitor_stat || monitor_stat->zombie()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(static_cast<pid_t>(monitor), SIGKILL);
  return sandbox_failed(monitor, dir, writer, "");
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

Result<std::vector<FoundSandbox>> LocalBackend::running_sandboxes() {
  // The label finds the candidates; which container each is, edtd's
  // records and the kernel's cgroups say (local_backend.h).
  const std::vector<SandboxRecord> records = read_records(options_.data_dir + "/containers");
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
  // As the container's login user (its image's User), at its home.
  const ContainerUser login = read_login(container_dir(spec.container));
  if (!login.root()) argv.insert(argv.end(), {"--user", user_ids(login)});
  argv.insert(argv.end(), {"--", "/usr/bin/env", "-i", "-C", login.home});
  std::map<std::string, std::string> env = spec.env;
  set_login_env(login, env);
  for (const auto& [key, value] : env) argv.push_back(key + "=" + value);
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

SshEndpoint LocalBackend::ssh_endpoint(const std::string& name, const std::string& address) {
  return {address, ssh_port(), read_login(container_dir(name)).name, false};
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
