#include "control/backends/slurm/slurm_node.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "common/io.h"
#include "common/log.h"
#include "common/process.h"
#include "control/backends/local/container_log.h"
#include "control/backends/local/host_command.h"
#include "control/backends/slurm/slurm_jobs.h"
#include "control/model/container_files.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback = "") {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

// The reason on one line: edtd quotes the job output's last such line.
int fail(std::string why) {
  for (size_t at = why.find('\n'); at != std::string::npos; at = why.find('\n', at))
    why.replace(at, 1, at + 1 == why.size() ? "" : " / ");
  std::fprintf(stderr, "edt slurm-node: %s\n", why.c_str());
  return 1;
}

// What the sandbox needs of the node before it starts: the directories the
// helper makes on the way (etc-links, binds...) passable by the container's
// root (an unprivileged id, with user namespaces), whatever umask the job
// inherited from edtd's sbatch; and each parent of the shared directory
// passable too (the containers' files are below it).
Status prepare_node(const LocalBackendOptions& options) {
  ::umask(022);
  if (options.first_subordinate_id == 0) return Status::ok();
  const std::string parent = slurm_jobs::unpassable_parent(options.data_dir);
  if (parent.empty()) return Status::ok();
  return failed_precondition("the container's root, an unprivileged id on this node, cannot pass through " +
                             parent + " above the shared directory " + options.data_dir +
                             ": chmod o+x it, or give edtd a --slurm-shared-dir whose parents others may enter");
}

// The job's GPUs, as Slurm gave them, in the spec and its environment.
// SLURM_JOB_GPUS holds their places in the node's gres.conf, with or
// without ConstrainDevices: their /dev/nvidia<i> where gres.conf lists
// /dev/nvidia[0-N] in order, as sites write it (docs/slurm.md). The job's
// CUDA_VISIBLE_DEVICES is 0..n-1 under ConstrainDevices, so no source. In
// the container CUDA numbers them 0..n-1, as Slurm does under
// ConstrainDevices (gpu_env()).
Status take_gpus(SandboxSpec& spec) {
  if (spec.gpus.empty()) return Status::ok();
  const std::string given = env_or("SLURM_JOB_GPUS", env_or("SLURM_STEP_GPUS"));
  auto gpus = slurm_jobs::parse_gpu_list(given);
  if (!gpus || gpus->size() != spec.gpus.size())
    return failed_precondition("the container asks for " + std::to_string(spec.gpus.size()) +
                               " GPUs but Slurm gave the job '" + given + "' (SLURM_JOB_GPUS)");
  spec.gpus = *gpus;
  for (const auto& [key, value] : gpu_env(spec.gpus)) spec.env[key] = value;
  return Status::ok();
}

// What the helper keeps current while its container runs.
class Watch {
 public:
  // `network`: the container's macvlan's, if it has one.
  Watch(LocalBackend& backend, const SandboxSpec& spec, const std::optional<ContainerNetworkOptions>& network,
        SandboxRef ref, std::string job, std::string jobs_path)
      : backend_(backend), spec_(spec), ref_(ref), job_(std::move(job)), workers_path_(std::move(jobs_path) + ".workers") {
    if (network) network_ = std::make_unique<ContainerNetwork>(*network);
    if (network_) peers_ = network_->cluster_peers(spec.cluster);
  }

  // The filter, when the cluster's addresses changed.
  void filter() {
    if (!network_) return;
    auto now = network_->cluster_peers(spec_.cluster);
    if (now == peers_) return;
    Status st = network_->filter_macvlan(spec_.name, static_cast<pid_t>(ref_.pid), now);
    if (st.is_ok()) peers_ = now;
    else if (proc::alive(ref_)) std::fprintf(stderr, "edt slurm-node: warning: %s\n", st.message().c_str());
  }

  // The number of edtrun workers in it, for edtd's drain, when it changed.
  void workers() {
    auto count = backend_.training_processes(ref_);
    if (!count.is_ok() || *count == workers_) return;
    workers_ = *count;
    (void)io::replace_file(workers_path_, std::to_string(workers_) + "\n", 0644);
  }

  // Every 5 s: whether Slurm says the job no longer runs, as when its node
  // was declared failed while this node lives on (its slurmd gone): then the
  // job's container is started elsewhere, at the same address. Slurm not
  // answering says nothing.
  bool lost() {
    const auto now = std::chrono::steady_clock::now();
    if (now - asked_ < std::chrono::seconds(5)) return false;
    asked_ = now;
    auto out = run_host_command({"/usr/bin/squeue", "-h", "-t", "all", "-j", job_, "-o", "%T"});
    std::string state = out.is_ok() ? *out : "";
    while (!state.empty() && (state.back() == '\n' || state.back() == ' ')) state.pop_back();
    const bool gone = !out.is_ok() && out.status().message().find("Invalid job id") != std::string::npos;
    if (!gone && (state.empty() || !slurm_jobs::ended(state))) return false;
    std::fprintf(stderr, "edt slurm-node: Slurm says job %s is %s: ending container %s\n", job_.c_str(),
                 gone ? "gone" : state.c_str(), spec_.name.c_str());
    return true;
  }

 private:
  LocalBackend& backend_;
  const SandboxSpec& spec_;
  std::unique_ptr<ContainerNetwork> network_;
  SandboxRef ref_;
  std::string job_, workers_path_;
  std::vector<std::string> peers_;
  int workers_ = -1;
  std::chrono::steady_clock::time_point asked_ = std::chrono::steady_clock::now();
};

// Waits for the sandbox to end, passing SIGTERM and SIGINT on, keeping
// `watch` current, and ending it when Slurm lost its job; reaps what was
// reparented to it. Returns whether it was asked to end (a signal, or
// Slurm's word); false: it ended on its own.
bool stay(LocalBackend& backend, const SandboxRef& ref, Watch& watch, const sigset_t& signals) {
  bool asked = false;
  while (proc::alive(ref)) {
    watch.filter();
    const timespec tick{0, 200'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (sig == SIGTERM || sig == SIGINT) {
      asked = true;
      (void)backend.signal(ref, SIGTERM);
    }
    watch.workers();
    if (watch.lost()) {
      asked = true;
      (void)backend.signal(ref, SIGKILL);
    }
  }
  return asked;
}

// Why a container that ended on its own ended: the last lines of its log
// (sshd's "Bind to port ... failed", a daemon's error), once its log
// writer, reparented to this process, has written everything and ended
// (at most 2 s).
std::string own_end(const std::string& container_dir) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (waitpid(-1, nullptr, WNOHANG) >= 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::istringstream lines(container_log_tail(container_dir, 1024));
  std::string line, last, before;
  while (std::getline(lines, line))
    if (!line.empty()) {
      before = std::move(last);
      last = std::move(line);
    }
  return before.empty() ? last : before + "\n" + last;
}

}  // namespace

int slurm_node_main(int argc, char** argv) {
  if (argc != 3) return fail("usage: edtd slurm-node JOBFILE (run by the container's Slurm job)");
  const std::string job = env_or("SLURM_JOB_ID");
  if (job.empty()) return fail("SLURM_JOB_ID is not set: this runs inside a container's Slurm job");
  std::ifstream in(argv[2]);
  auto parsed = nlohmann::json::parse(in, nullptr, false);
  if (parsed.is_discarded()) return fail(std::string("cannot read the job file ") + argv[2]);
  auto read = slurm_jobs::read_job_file(parsed);
  if (!read.is_ok()) return fail(read.status().message());
  auto [spec, options] = std::move(read).value();
  if (!options.network && !spec.own_user) return fail("the job file names no network for the container");
  if (Status st = take_gpus(spec); !st.is_ok()) return fail(st.message());
  if (Status st = prepare_node(options); !st.is_ok()) return fail(st.message());
  // What the sandbox leaves behind when its monitor exits is this
  // process's to reap, and stays in the job's process tree.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD}) sigaddset(&signals, sig);
  sigprocmask(SIG_BLOCK, &signals, nullptr);
  log::init("edt-slurm-node");
  const std::string jobs = options.data_dir + "/slurm/jobs/" + job;
  LocalBackend backend(options);
  auto ref = backend.start(spec);
  if (!ref.is_ok()) return fail(ref.status().message());
  std::printf("container %s runs on %s as pid %lld\n", spec.name.c_str(), env_or("SLURMD_NODENAME").c_str(),
              static_cast<long long>(ref->pid));
  std::fflush(stdout);
  (void)io::replace_file(jobs, std::to_string(ref->pid) + " " + spec.name + "\n", 0644);
  Watch watch(backend, spec, options.network, *ref, job, jobs);
  const bool asked = stay(backend, *ref, watch, signals);
  std::error_code ec;
  fs::remove(jobs, ec);
  fs::remove(jobs + ".workers", ec);
  if (!asked) {
    const std::string why = own_end(options.data_dir + "/containers/" + spec.name);
    return fail("container " + spec.name + " ended on its own" + (why.empty() ? "" : ": " + why));
  }
  std::printf("container %s ended\n", spec.name.c_str());
  return 0;
}

}  // namespace edt::control
