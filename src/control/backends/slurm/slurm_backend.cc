#include "control/backends/slurm/slurm_backend.h"

#include <pwd.h>
#include <signal.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/io.h"
#include "common/log.h"
#include "common/net.h"
#include "common/shell.h"
#include "control/backends/local/cgroups.h"
#include "control/backends/local/enter.h"
#include "control/backends/local/host_command.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;
constexpr const char* kSlurmPackages = "slurm-client";
constexpr const char* kNoSlurmClusters =
    "a cluster of framework slurm runs Slurm's daemons as root in its containers, and with --slurm-mode user "
    "edtd's containers run as edtd's own user; ask the admin for an edtd with --slurm-mode root";

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "TERM";
    case SIGINT: return "INT";
    case SIGHUP: return "HUP";
    case SIGUSR1: return "USR1";
    case SIGUSR2: return "USR2";
    default: return "KILL";
  }
}

// The node's last error in a job's output ("edt slurm-node: ..."), as
// "; <it>", or "" when it has none.
std::string last_words(const std::string& output) {
  std::istringstream in(io::read_file(output));
  std::string line, last;
  while (std::getline(in, line))
    if (line.starts_with("edt slurm-node: ") && !line.starts_with("edt slurm-node: warning: ")) last = line.substr(16);
  return last.empty() ? "" : "; " + last;
}

// `files`, once the shared directory's missing parents are made passable
// (mode 0711, not the umask's): the containers' root passes through them
// on the nodes. One that exists and is not is named in a warning here, and
// in the error of every container's start (slurm_node.cc).
LocalBackendOptions with_shared_dir(LocalBackendOptions files) {
  if (Status st = slurm_jobs::make_passable_parents(files.data_dir); !st.is_ok())
    log::warn("--slurm-shared-dir {}: {}", files.data_dir, st.message());
  if (std::string parent = slurm_jobs::unpassable_parent(files.data_dir);
      !parent.empty() && files.first_subordinate_id != 0)
    log::warn("--slurm-shared-dir {}: containers will not start: their root, an unprivileged id on the nodes, "
              "cannot pass through {}; chmod o+x it, or choose a shared directory whose parents others may enter",
              files.data_dir, parent);
  return files;
}

}  // namespace

SlurmBackend::SlurmBackend(LocalBackendOptions files, SlurmBackendOptions options)
    : LocalBackend(with_shared_dir(std::move(files))), options_(std::move(options)), key_(cgroup_key(home())) {
  const struct passwd* me = ::getpwuid(::geteuid());
  user_ = me ? me->pw_name : std::to_string(::geteuid());
  std::error_code ec;
  fs::create_directories(slurm_dir() + "/jobs", ec);
  ::chmod(slurm_dir().c_str(), 0700);
}

std::string SlurmBackend::slurm_dir() const { return home() + "/slurm"; }

Status SlurmBackend::prepare_cluster(const std::string& cluster) {
  EDT_RETURN_IF_ERROR(LocalBackend::prepare_cluster(cluster));
  // Made on the way to its mpi/ with edtd's umask: the containers' root
  // passes through it on the nodes to bind mpi/ (but lists nothing).
  ::chmod((home() + "/clusters/" + cluster).c_str(), 0711);
  return Status::ok();
}

std::string SlurmBackend::job_path(int64_t job) const { return slurm_dir() + "/jobs/" + std::to_string(job); }

Result<std::map<std::string, int>> SlurmBackend::partition_gpus(const std::string& partition) {
  auto out = run_host_command({"/usr/bin/sinfo", "-h", "-N", "-p", partition, "-o", "%N|%G"}, kSlurmPackages);
  if (!out.is_ok()) return out.status().with_context("--slurm-partition " + partition);
  auto known = run_host_command({"/usr/bin/sinfo", "-h", "-p", partition, "-o", "%P"}, kSlurmPackages);
  if (!known.is_ok() || known->empty())
    return invalid_argument("--slurm-partition " + partition +
                            ": Slurm has no such partition (sinfo -s lists them); name one of its partitions");
  return slurm_jobs::parse_gres_inventory(*out);
}

Result<std::string> SlurmBackend::source_address_toward(const std::string& address) {
  EDT_ASSIGN_OR_RETURN(std::string out, run_host_command({"/usr/sbin/ip", "-j", "route", "get", address}, "iproute2"));
  auto routes = nlohmann::json::parse(out, nullptr, false);
  if (routes.is_array() && !routes.empty() && routes[0].contains("prefsrc") && routes[0]["prefsrc"].is_string())
    return routes[0]["prefsrc"].get<std::string>();
  return failed_precondition("this host has no address toward " + address +
                             " (ip route get): edtd must run on a host of the nodes' network");
}

Result<SandboxRef> SlurmBackend::start(const SandboxSpec& spec) {
  // A directory left by an earlier job of this container would say its
  // sshd listens before the new one does.
  std::error_code ec;
  fs::remove_all(container_dir(spec.name), ec);
  LocalBackendOptions node = options();
  SandboxSpec placed = spec;
  if (options_.own_user) {
    placed.own_user = true;
    node.ssh_port = slurm_jobs::slot_port(spec.address);
    if (placed.slurm) return failed_precondition(kNoSlurmClusters);
  } else {
    ContainerNetworkOptions network;
    network.parent = options_.interface;
    network.gateway = options_.gateway;
    network.prefix = options_.prefix;
    network.login_address = options_.login_address;
    network.range = options_.range;
    network.containers_dir = node.data_dir + "/containers";
    node.network = network;
  }
  const std::string file = slurm_dir() + "/" + spec.name + ".json";
  EDT_RETURN_IF_ERROR(io::replace_file(file, slurm_jobs::job_file(placed, node).dump(), 0600));
  const std::string command = shell_quote(options_.node_program) + " slurm-node " + shell_quote(file);
  auto out = run_host_command(slurm_jobs::sbatch_argv(spec, options_.placement, key_,
                                                      slurm_dir() + "/" + spec.name + ".out", command),
                              kSlurmPackages);
  if (!out.is_ok()) return out.status().with_context("place container " + spec.name + " with sbatch");
  const int64_t job = slurm_jobs::parse_job_id(*out);
  if (job == 0) return internal_error("sbatch gave no job id for container " + spec.name + ": " + *out);
  log::info("container {} is Slurm job {}", spec.name, job);
  forget_jobs();
  return SandboxRef{job, 0};
}

Result<std::map<int64_t, slurm_jobs::Job>> SlurmBackend::jobs(bool fresh) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (!fresh && now - jobs_at_ < std::chrono::milliseconds(250)) return jobs_;
  auto out = run_host_command({"/usr/bin/squeue", "--me", "-h", "-t", "all", "-o", slurm_jobs::kSqueueFormat},
                              kSlurmPackages);
  if (!out.is_ok()) return out.status();
  jobs_.clear();
  for (auto& job : slurm_jobs::parse_squeue(*out))
    if (!slurm_jobs::container_of(key_, job.name).empty()) jobs_[job.id] = std::move(job);
  jobs_at_ = now;
  return jobs_;
}

void SlurmBackend::forget_jobs() {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_at_ = {};
}

SandboxState SlurmBackend::observe(const std::string& name, const SandboxRef& ref) {
  auto all = jobs();
  if (!all.is_ok()) {
    // Slurm did not answer: nothing is known to have changed.
    log::warn("squeue: {}", all.status().message());
    return SandboxState::kStarting;
  }
  auto it = all->find(ref.pid);
  if (it == all->end() || slurm_jobs::ended(it->second.state)) return SandboxState::kGone;
  if (slurm_jobs::waiting(it->second.state)) return SandboxState::kQueued;
  return sandbox_ready(container_dir(name)) ? SandboxState::kReady : SandboxState::kStarting;
}

SandboxPlacement SlurmBackend::placement(const SandboxRef& ref) {
  auto all = jobs();
  SandboxPlacement where{"", ref.pid, ""};
  const std::string job = "Slurm job " + std::to_string(ref.pid);
  if (!all.is_ok()) return where;
  auto it = all->find(ref.pid);
  if (it == all->end()) {
    where.reason = job + " is gone from squeue";
    return where;
  }
  const slurm_jobs::Job& j = it->second;
  where.node = j.node;
  if (slurm_jobs::waiting(j.state))
    where.reason = job + " is " + j.state + ": " + (j.reason == "None" ? "waiting to be scheduled" : j.reason);
  else if (slurm_jobs::ended(j.state))
    where.reason = job + (j.node.empty() ? "" : " on " + j.node) + " ended: " + j.state +
                   last_words(slurm_dir() + "/" + slurm_jobs::container_of(key_, j.name) + ".out");
  return where;
}

Status SlurmBackend::signal(const SandboxRef& ref, int sig) {
  std::vector<std::string> argv = {"/usr/bin/scancel"};
  // Any signal but KILL goes to the node's helper alone, which hands it to
  // every process of the container; KILL ends the job, and so does any
  // signal to a job still waiting (nothing of it runs yet).
  auto all = jobs(true);
  const bool waiting = all.is_ok() && all->count(ref.pid) && slurm_jobs::waiting(all->at(ref.pid).state);
  if (sig != SIGKILL && !waiting)
    argv.insert(argv.end(), {"--batch", std::string("--signal=") + signal_name(sig)});
  argv.push_back(std::to_string(ref.pid));
  auto out = run_host_command(argv, kSlurmPackages);
  if (!out.is_ok() && out.status().message().find("already completed") == std::string::npos &&
      out.status().message().find("Invalid job id") == std::string::npos)
    return out.status().with_context("signal Slurm job " + std::to_string(ref.pid));
  forget_jobs();
  return Status::ok();
}

Result<int> SlurmBackend::training_processes(const SandboxRef& ref) {
  const std::string text = io::read_file(job_path(ref.pid) + ".workers");
  return text.empty() ? 0 : std::atoi(text.c_str());
}

Result<std::vector<FoundSandbox>> SlurmBackend::running_sandboxes() {
  EDT_ASSIGN_OR_RETURN(auto all, jobs(true));
  std::vector<FoundSandbox> out;
  for (const auto& [id, job] : all)
    if (!slurm_jobs::ended(job.state))
      out.push_back({job.cluster, slurm_jobs::container_of(key_, job.name), SandboxRef{id, 0}});
  return out;
}

Result<int> SlurmBackend::end_sandboxes_except(const std::vector<SandboxRef>& keep) {
  EDT_ASSIGN_OR_RETURN(std::vector<FoundSandbox> running, running_sandboxes());
  std::vector<std::string> cancel = {"/usr/bin/scancel"};
  for (const auto& f : running)
    if (std::find(keep.begin(), keep.end(), f.ref) == keep.end()) cancel.push_back(std::to_string(f.ref.pid));
  const int count = static_cast<int>(cancel.size()) - 1;
  if (count == 0) return 0;
  EDT_RETURN_IF_ERROR(run_host_command(cancel, kSlurmPackages).status().with_context("end stray Slurm jobs"));
  // Their addresses are free once their jobs have ended.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    EDT_ASSIGN_OR_RETURN(running, running_sandboxes());
    const bool left = std::any_of(running.begin(), running.end(), [&](const FoundSandbox& f) {
      return std::find(keep.begin(), keep.end(), f.ref) == keep.end();
    });
    if (!left) return count;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return internal_error("stray Slurm jobs did not end within 30 s of scancel");
}

Status SlurmBackend::remove(const std::string& name) {
  std::error_code ec;
  for (const char* suffix : {".json", ".out"}) fs::remove(slurm_dir() + "/" + name + suffix, ec);
  return LocalBackend::remove(name);
}

Result<std::string> SlurmBackend::node_address(const std::string& node) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = node_addresses_.find(node); it != node_addresses_.end()) return it->second;
  }
  EDT_ASSIGN_OR_RETURN(std::string out,
                       run_host_command({"/usr/bin/scontrol", "-o", "show", "node", node}, kSlurmPackages));
  const std::string name = slurm_jobs::parse_node_address(out);
  if (name.empty()) return not_found("Slurm gives node " + node + " no NodeAddr");
  EDT_ASSIGN_OR_RETURN(std::string address, net::resolve_ipv4(name));
  std::lock_guard<std::mutex> lock(mu_);
  node_addresses_[node] = address;
  return address;
}

std::string SlurmBackend::node_address_of(const std::string& name) {
  auto all = jobs();
  if (!all.is_ok()) return "";
  for (const auto& [id, job] : *all) {
    if (job.node.empty() || slurm_jobs::waiting(job.state) || slurm_jobs::ended(job.state) ||
        slurm_jobs::container_of(key_, job.name) != name)
      continue;
    auto address = node_address(job.node);
    if (address.is_ok()) return *address;
    log::warn("container {} runs on node {}, whose address edtd cannot tell: {}", name, job.node,
              address.status().message());
  }
  return "";
}

Status SlurmBackend::write_cluster_files(const std::string& cluster, const ClusterFiles& files) {
  if (!options_.own_user) return LocalBackend::write_cluster_files(cluster, files);
  ClusterFiles placed = files;
  placed.hosts = "127.0.0.1\tlocalhost\n";
  std::string ssh = "# Where each container of cluster " + cluster + " listens: its node, its own port.\n";
  std::istringstream lines(files.hosts);
  for (std::string slot, name; lines >> slot >> name;) {
    const int port = slurm_jobs::slot_port(slot);
    const std::string address = port == 0 ? "" : node_address_of(name);
    if (address.empty()) continue;
    placed.hosts += address + "\t" + name + "\n";
    // Its host certificate names it; the address is its node's.
    ssh += "Host " + name + "\n  HostName " + address + "\n  Port " + std::to_string(port) + "\n  HostKeyAlias " +
           name + "\n";
  }
  EDT_RETURN_IF_ERROR(LocalBackend::write_cluster_files(cluster, placed));
  return io::replace_file(home() + "/clusters/" + cluster + "/mpi/ssh_config", ssh, 0644);
}

Status SlurmBackend::accepts(const ClusterSpec& spec) const {
  if (options_.own_user && spec.framework == "slurm")
    return invalid("framework", kNoSlurmClusters, "choose framework horovod, deepspeed or megatron");
  return Status::ok();
}

SshEndpoint SlurmBackend::ssh_endpoint(const std::string& name, const std::string& address) {
  if (!options_.own_user) return LocalBackend::ssh_endpoint(name, address);
  return {node_address_of(name), slurm_jobs::slot_port(address), user_, true};
}

std::string SlurmBackend::shown_address(const ContainerStatus& c) {
  if (!options_.own_user) return LocalBackend::shown_address(c);
  if (c.node.empty()) return "";
  auto address = node_address(c.node);
  return address.is_ok() ? *address : "";
}

Result<std::vector<std::string>> SlurmBackend::enter_command(const SandboxRef& container) {
  // "<pid> <container>", written by the node once the sandbox runs.
  std::istringstream in(io::read_file(job_path(container.pid)));
  int64_t pid = 0;
  if (!(in >> pid) || pid <= 0) return failed_precondition("the container is not running");
  // srun finds Slurm as edtd does (exec's wrapper has a bare environment).
  std::vector<std::string> argv = {"/usr/bin/env"};
  if (const char* conf = std::getenv("SLURM_CONF")) argv.push_back(std::string("SLURM_CONF=") + conf);
  argv.insert(argv.end(), {"/usr/bin/srun", "--jobid=" + std::to_string(container.pid), "--overlap", "--nodes=1",
                           "--ntasks=1", "--quiet", "--gres=none", options_.node_program, kEnterContainerCommand,
                           std::to_string(pid)});
  return argv;
}

}  // namespace edt::control
