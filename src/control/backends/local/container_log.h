// A container's log writer: `edtd container-log <dir>`, which LocalBackend
// starts beside each sandbox (local_backend.h, "The log"). The sandbox's
// stdout and stderr are a pipe; this process is its only reader. It
//   - opens <dir>/log, <dir>/log.1 and <dir>/ready itself (never through a
//     link), then drops to nobody (uid and gid 65534, no groups, no
//     capabilities, no_new_privs) before it reads a byte of the container's;
//   - keeps `log` under kContainerLogBytes: when a write would pass it, the
//     log so far becomes log.1 (copied over it; the writer may not rename in
//     a directory it no longer owns) and `log` starts again with a marker
//     line. What a container writes costs the host at most 2 x the bound;
//   - writes "1\n" to `ready` the first time sshd -e says "Server listening
//     on", so that observe() learns readiness from one stat, not a read;
//   - ends when the pipe closes (every process of the sandbox is gone), not
//     with edtd: it is started detached, so an edtd that restarts finds it
//     still at work for the sandboxes it adopts.
// It carries no label (backend.h), so end_sandboxes_except() never takes it
// for a stray; it runs in the container's cgroups, so its CPU is the
// container's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/process.h"
#include "edt/status.h"

namespace edt::control {

inline constexpr const char* kContainerLogCommand = "container-log";
inline constexpr int64_t kContainerLogBytes = int64_t{1} << 20;  // per file: log and log.1
inline constexpr std::string_view kReadyLine = "Server listening on";

// The bounded log over three open files. Not thread-safe; one writer.
class BoundedLog {
 public:
  // `log`, `rotated` (log.1) and `ready`: open for writing (log also for
  // reading, with O_APPEND); `bound`: the most bytes `log` holds, > 0.
  BoundedLog(int log, int rotated, int ready, int64_t bound = kContainerLogBytes);
  // Writes `bytes` (at most `bound` of them at once), rotating first when
  // they would not fit; notes readiness. False on an I/O error.
  bool write(std::string_view bytes);
  bool ready() const { return ready_; }

 private:
  bool rotate();
  void scan(std::string_view bytes);

  int log_, rotated_, ready_fd_;
  int64_t bound_;
  int64_t size_ = 0;   // of `log`
  std::string carry_;  // the end of the last chunk, where kReadyLine may begin
  bool ready_ = false;
};

// argv: {"edtd", "container-log", "<dir>"}; stdin is the sandbox's pipe.
// Returns 0 at the pipe's end, 1 with a message in the log (or on stderr)
// when it could not start.
int container_log_main(int argc, char** argv);

// The last `bytes` bytes of <dir>/log (read with pread, never the whole
// file), for the errors that quote what a sandbox said; empty when none.
std::string container_log_tail(const std::string& dir, size_t bytes = 4096);

// The end of a failed sandbox's log, once its `writer` has it all (it ends
// when every process of the sandbox is gone) or 2 s passed.
std::string last_words(const std::string& dir, const proc::ProcessId& writer);

// `st` with last_words() appended ("; the sandbox said: ..."), if any.
Status with_last_words(const Status& st, const std::string& dir, const proc::ProcessId& writer);

}  // namespace edt::control
