// Processes as edt identifies them: a pid together with its start time, so
// that a pid the kernel has reused is never taken for the process it named.
// One /proc/<pid>/stat parser for everything that watches another process
// (edtd's sandboxes and jobs, a rank's local peers, the launcher's tests).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "edt/status.h"

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
// The same from the text of a /proc/<pid>/stat file.
std::optional<Stat> parse_stat(std::string_view text);

// The identity of a running process, or nullopt if it does not exist.
std::optional<ProcessId> identify(int64_t pid);

// True if `id` names a process that exists, is not a zombie, and started at
// id.start_time. A zombie has exited: only its exit status is left to reap.
bool alive(const ProcessId& id);

// In a child between fork and exec: empties the signal mask, which a fork
// copies from the forking thread (edtd's and edtrun's threads block SIGTERM
// and SIGINT), so that the program it runs takes signals as it expects.
// Async-signal-safe.
void unblock_signals();

// Whether `status`, the text of /proc/<pid>/status, is that of the init of
// a PID namespace below the reader's: the last of its NSpid pids, one per
// namespace level, is 1. No process of the reader's own namespace is one.
bool namespace_init(std::string_view status);

// A process held by a pidfd, for reading its /proc entries without a pid
// reuse window: open() takes a pidfd and then /proc/<pid> as a directory;
// every read goes through that directory. A pid is reused only once its
// process is gone, so if still_alive() holds after the reads, they were of
// the process the pidfd names. Move-only; closes its descriptors.
class PinnedProcess {
 public:
  // `pid` as a running process (not a zombie) that started at `start_time`
  // (0: any). Not found, exited, or another start time: kNotFound.
  static Result<PinnedProcess> open(int64_t pid, uint64_t start_time = 0);
  PinnedProcess(PinnedProcess&& other) noexcept;
  PinnedProcess& operator=(PinnedProcess&& other) noexcept;
  PinnedProcess(const PinnedProcess&) = delete;
  PinnedProcess& operator=(const PinnedProcess&) = delete;
  ~PinnedProcess();

  int64_t pid() const { return pid_; }
  int pidfd() const { return pidfd_; }
  // /proc/<pid>/`name` as text; empty if it cannot be read.
  std::string read(const std::string& name) const;
  // /proc/<pid>/`name` opened with `flags` (O_CLOEXEC added); -1 with errno.
  int open_entry(const std::string& name, int flags) const;
  // Whether the process has not exited (its pidfd is not readable).
  bool still_alive() const;

 private:
  PinnedProcess(int64_t pid, int pidfd, int dir) : pid_(pid), pidfd_(pidfd), dir_(dir) {}
  void close_all();

  int64_t pid_ = 0;
  int pidfd_ = -1;
  int dir_ = -1;
};

// `strings` as the NULL-terminated array execv/execve take (pointing into
// `strings`, which must outlive it). Made before fork: a child of a process
// with threads may only make async-signal-safe calls, and allocating is not one.
std::vector<char*> c_strings(const std::vector<std::string>& strings);

}  // namespace edt::proc
