// Starting a sandbox's processes from edtd, which has threads: the spawn
// primitive and the namespace steps its child takes before it execs.
//
// spawn_detached() starts a program in a session of its own, not as
// edtd's child (a double fork), so it keeps running when edtd exits or is
// killed; the caller gets its pid. Everything the child needs is made
// before fork; after it the child makes only async-signal-safe calls: it
// sets its descriptors (Spawn's fds 0-5), bounds its open files, joins the
// container's cgroups, makes its own mount namespace with the staged binds,
// and, with user namespaces, becomes root of a namespace of its own whose
// ids edtd maps to the host's (map_ids) before it goes on.
//
// With user namespaces bubblewrap runs as the container's unprivileged
// root, which cannot pass through a directory such as /root (0700) above a
// bind's source. So stage_sources() makes a stand-in for each source under
// <container dir>/binds/N, and the sandbox's first process, still the
// host's root, binds each source there in its mount namespace
// (Spawn::staged_binds); bubblewrap binds it from there. The host's view of
// binds/N stays an empty directory.
//
// Any thread of edtd may call these; they keep no state.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "control/backends/backend.h"
#include "edt/status.h"

namespace edt::control {

// A pipe whose ends close with it (not copyable: one owner of each end).
struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() = default;
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void close_end(int end);
  ~Pipe();
};

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

// Starts spec.argv in a session of its own, not as our child: it keeps
// running when edtd exits or is killed. Returns its pid.
Result<int64_t> spawn_detached(const Spawn& spec);

// A bind whose source is gone (a volume's directory moved away) would stop
// the sandbox with a message about mounts; this names the source instead.
Status sources_exist(const std::vector<SandboxMount>& binds);

// Makes <dir>/binds/N for each of `binds` (a directory or an empty file,
// as its source is), points the bind's host_path there, and returns what
// the sandbox's first process must bind (Spawn::staged_binds).
Result<StagedBinds> stage_sources(std::vector<SandboxMount>& binds, const std::string& dir);

// The host's first id of subordinate range `range` (from 1) above `first`;
// an error when it does not fit below 2^32 - 1.
Result<uint32_t> subordinate_ids(uint32_t first, int64_t range);

}  // namespace edt::control
