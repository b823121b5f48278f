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
// A process joins by writing "0" (itself) into each of the container's
// cgroup.procs files (what make() returns): the sandbox's first process
// does so before it execs bubblewrap, so everything in the container is inside;
// edtd enter-container and the warm interpreter's workers join the cgroups
// of the container's init (join_cgroups_of()) before they enter its
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

class ContainerCgroups {
 public:
  // `fs_root` is where the hierarchies are mounted (tests give a directory
  // of their own); `key` names this edtd's parent cgroup (edt-<key>).
  ContainerCgroups(std::string fs_root, std::string key);

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
};

// A stable short key (hex) for `text`, such as a data dir.
std::string cgroup_key(const std::string& text);

// Moves the calling process into the pids, memory and cpu cgroups `pid` is
// in (v1; cpu also as a cpu,cpuacct hierarchy) or its unified cgroup (v2), as found in /proc/<pid>/cgroup under
// `fs_root`. A process with no such cgroup of its own (the root) is left.
Status join_cgroups_of(pid_t pid, const std::string& fs_root = "/sys/fs/cgroup");

}  // namespace edt::control
