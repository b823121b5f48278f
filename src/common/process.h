// Processes as edt identifies them: a pid together with its start time, so
// that a pid the kernel has reused is never taken for the process it named.
// One /proc/<pid>/stat parser for everything that watches another process
// (edtd's sandboxes and jobs, a rank's local peers, the launcher's tests).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace edt::proc {

// A process as another process refers to it. start_time is field 22 of
// /proc/<pid>/stat (clock ticks after boot); 0 means "unknown".
struct ProcessId {
  int64_t pid = 0;
  uint64_t start_time = 0;
  bool operator==(const ProcessId&) const = default;
};

struct Stat {
  char state = '?';  // field 3: R, S, D, Z (zombie), X (dead), ...
  int64_t ppid = 0;
  uint64_t start_time = 0;
  bool zombie() const { return state == 'Z' || state == 'X'; }
};

// The process's stat, or nullopt if there is no such pid (or it cannot be read).
std::optional<Stat> read_stat(int64_t pid);

// The identity of a running process, or nullopt if it does not exist.
std::optional<ProcessId> identify(int64_t pid);

// True if `id` names a process that exists, is not a zombie, and started at
// id.start_time. A zombie has exited: only its exit status is left to reap.
bool alive(const ProcessId& id);

// `strings` as the NULL-terminated array execv/execve take (pointing into
// `strings`, which must outlive it). Made before fork: a child of a process
// with threads may only make async-signal-safe calls, and allocating is not one.
std::vector<char*> c_strings(const std::vector<std::string>& strings);

}  // namespace edt::proc
