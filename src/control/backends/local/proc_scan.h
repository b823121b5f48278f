// Finding a data dir's sandboxes among the host's processes, through /proc:
// for adoption after a restart (LocalBackend::running_sandboxes), for
// ending strays, and for signalling a sandbox's processes.
//
// The label (local_backend.h, "The label"): bwrap runs with
// EDT_SANDBOX_HOME, EDT_SANDBOX_CLUSTER and EDT_SANDBOX_CONTAINER in its
// environment, and so does the sandbox's init. The label only finds
// candidates: container root may rewrite its init's environment, so which
// container a sandbox is comes from its cgroup (cgroup_container) and
// edtd's records (sandbox_record.h), never from the label.
//
// Everything here reads /proc as it is at the call: a process may end
// meanwhile, and then reads as absent (another user's process reads as
// unlabelled). No state; any thread may call these.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/process.h"
#include "control/model/cluster.h"

namespace edt::control {

// The label's variables, in the environment of bwrap's monitor and of the
// sandbox's init.
inline constexpr std::string_view kLabelHome = "EDT_SANDBOX_HOME";
inline constexpr std::string_view kLabelCluster = "EDT_SANDBOX_CLUSTER";
inline constexpr std::string_view kLabelContainer = "EDT_SANDBOX_CONTAINER";

// The processes whose PID namespace is that of `init` (none if it is gone).
std::vector<pid_t> processes_in_namespace(pid_t init);

// A live process that carries the label of sandboxes under `home`.
struct LabelledProcess {
  pid_t pid = 0;
  proc::Stat stat;
  std::string cluster;
  std::string name;
  bool init = false;   // pid 1 of its sandbox's PID namespace: the sandbox's ref
  bool outer = false;  // in our own PID namespace: bubblewrap's monitor
};

// The live, labelled processes of the sandboxes under `home` (the data
// dir, absolute), zombies left out.
std::vector<LabelledProcess> labelled_processes(const std::string& home);

// The labelled processes that are neither a sandbox in `keep` nor the
// monitor of one; the other processes in a sandbox end with its init.
std::vector<pid_t> stray_processes(const std::vector<LabelledProcess>& processes, const std::vector<SandboxRef>& keep);

// The container whose cgroup (a child of `parent`, edt-<key>) holds the
// process whose /proc/<pid>/cgroup is `proc_cgroup`; none when no line of
// it names one.
std::optional<std::string> cgroup_container(std::string_view proc_cgroup, std::string_view parent);

}  // namespace edt::control
