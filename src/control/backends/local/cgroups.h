// Container resource limits, as control groups: every container of the
// local backend gets a cgroup of its own in which the number of tasks
// (processes and threads: pids.max) and, when its cluster asks, its memory
// (its processes and its /dev/shm together) and its CPU time are bounded. A
// fork bomb in a container then ends at its own limit, a container over its
// memory is stopped by the kernel's OOM killer inside that container, not
// the host's, and one that would use more CPU than it asked is throttled.
//
// Both layouts are handled: cgroup v2 (one unified hierarchy at
// /sys/fs/cgroup; pids.max, memory.max, memory.swap.max, cpu.max) and v1 (a
// hierarchy per controller, /sys/fs/cgroup/pids, /sys/fs/cgroup/memory and
// /sys/fs/cgroup/cpu, which may be a link to a cpu,cpuacct one; pids.max,
// memory.limit_in_bytes and memory.memsw.limit_in_bytes where swap is
// accounted, cpu.cfs_period_us and cpu.cfs_quota_us). The CPU bound is a
// quota of CPU time in every 100 ms period: 1.5 CPUs, 150 ms of it.
// A container's cgroup is <hierarchy>/edt-<key>/<container>,
// where the key tells apart the edtd instances of different data dirs.
//
// Host-wide bounds (docs/security.md, "Resource bounds"): the kernel's
// tasks (min(pid_max, threads-max)) are shared by every process of the
// host, so one container's default bound is a sixteenth of them, at most
// 4096 (container_pids_share), and the parent edt-<key> bounds all of this
// edtd's containers together to half (all_containers_pids_max): whatever
// the tenants do, the host keeps the other half. Open files: every process
// of a container has RLIMIT_NOFILE kContainerOpenFiles, soft and hard,
// which it cannot raise (no CAP_SYS_RESOURCE in the host's user
// namespace); a container holds at most pids.max times that.
//
// A process joins by writing "0" (itself) into each of the container's
// cgroup.procs files (what make() returns): the sandbox's first process
// does so before it execs bubblewrap, so everything in the container is inside;
// edtd enter-container and the warm interpreter's workers join the cgroups
// of the container's init (join_cgroups()) before they enter its
// namespaces.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "edt/status.h"

namespace edt::control {

struct ContainerLimits {
  int64_t pids_max = 0;       // 0: no bound
  uint64_t memory_bytes = 0;  // 0: no bound
  int64_t cpu_millis = 0;     // thousandths of a CPU; 0: no bound
};

// What the host's kernel allows in all: /proc/sys/kernel/pid_max and
// threads-max.
struct HostTasks {
  int64_t pid_max = 0;
  int64_t threads_max = 0;
};

// Reads them from `proc_sys_kernel`; an error names the file and what it held.
Result<HostTasks> read_host_tasks(const std::string& proc_sys_kernel = "/proc/sys/kernel");
// One container's default bound on tasks: min(4096, tasks / 16), where
// tasks = min(pid_max, threads-max); 2048 on a host whose pid_max is 32768.
int64_t container_pids_share(const HostTasks& host);
// All of one edtd's containers together (edt-<key>'s pids.max): tasks / 2.
int64_t all_containers_pids_max(const HostTasks& host);

// Every container process's RLIMIT_NOFILE, soft and hard: the kernel's own
// default soft limit (INR_OPEN_CUR).
inline constexpr uint64_t kContainerOpenFiles = 1024;
// Sets the caller's RLIMIT_NOFILE to kContainerOpenFiles (it may only lower
// a hard limit). Async-signal-safe: a forked child calls it before exec.
bool bound_open_files();

class ContainerCgroups {
 public:
  // all_pids_max's "the host's": all_containers_pids_max(read_host_tasks()).
  static constexpr int64_t kHostShare = -1;

  // `fs_root` is where the hierarchies are mounted (tests give a directory
  // of their own); `key` names this edtd's parent cgroup (edt-<key>), whose
  // pids.max make() sets to `all_pids_max` (0: no bound) whenever it bounds
  // a container's tasks.
  ContainerCgroups(std::string fs_root, std::string key, int64_t all_pids_max = kHostShare);

  // Why `limits` cannot be applied on this machine (no such controller, or
  // its hierarchy is not writable); empty when they can.
  std::string unavailable(const ContainerLimits& limits) const;

  // Makes (or remakes) the container's cgroups and writes its limits; the
  // cgroup.procs files a process writes "0" into to join them. None
  // when `limits` bounds nothing.
  Result<std::vector<std::string>> make(const std::string& container, const ContainerLimits& limits) const;

  // Removes the container's cgroups once they are empty (waiting up to 2 s
  // for processes still exiting); one that is missing is fine.
  Status remove(const std::string& container) const;

 private:
  bool unified() const;
  // The directories of the container's cgroup, one per hierarchy in use,
  // with the controller each is for ("" for v2's one: all of them).
  std::vector<std::pair<std::string, std::string>> dirs(const std::string& container,
                                                        const ContainerLimits& limits) const;

  std::string root_;
  std::string parent_;  // edt-<key>
  int64_t all_pids_max_;
};

// A stable short key (hex) for `text`, such as a data dir.
std::string cgroup_key(const std::string& text);

// Moves the calling process into the container's pids, memory and cpu
// cgroups (v1; cpu also as a cpu,cpuacct hierarchy) or its unified cgroup
// (v2) that `proc_cgroup`, the text of a container process's
// /proc/<pid>/cgroup, names, under `fs_root`. Without such cgroups (the
// root's) it stays. Either way it takes a container's RLIMIT_NOFILE
// (bound_open_files()). The caller reads the text from the process it has
// pinned (proc::PinnedProcess), never by a pid alone.
Status join_cgroups(const std::string& proc_cgroup, const std::string& fs_root = "/sys/fs/cgroup");

}  // namespace edt::control
