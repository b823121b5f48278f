// A job's log, bounded: what a job writes reaches its log file through a
// relay, `edtd job-log`, a process detached from edtd like the job itself
// (so both outlive a restart of edtd). The job's wrapper writes into a FIFO
// (jobs/<id>.pipe); the relay reads it and writes jobs/<id>.log.
//
// The bound (edtd --job-log-limit, 16 MiB by default): the log keeps the
// first (limit - tail) bytes, written as they come, and the last `tail`
// bytes (a quarter of the limit, at most 1 MiB), held in memory and written
// when the job ends, each part after a marker line that says how much was
// dropped between them. So a log never grows past the limit and two marker
// lines, the first lines and the last ones (where an error usually is) are
// kept, and the relay's memory is the tail and one read buffer. The relay
// reads on whatever the job writes, never blocking it: what is past the
// bound is read and dropped.
//
// The job's end: the wrapper writes its command's exit code to
// jobs/<id>.code; the relay, once it has seen that file and read what the
// FIFO held, writes the tail and renames <id>.code to <id>.exit, which is
// what JobRunner reads. So a job is reported ended only with all of its
// command's output in the log. What processes the command left behind write
// after that is dropped; the relay ends when the last of them closes the FIFO.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/process.h"
#include "edt/status.h"

namespace edt::control {

// The first argument edtd's main() hands to job_log_main().
inline constexpr const char* kJobLogCommand = "job-log";
inline constexpr uint64_t kDefaultJobLogLimit = uint64_t{16} << 20;
inline constexpr uint64_t kMinJobLogLimit = uint64_t{4} << 10;

// The head-and-tail bound over one file descriptor. Not thread-safe.
class JobLogWriter {
 public:
  JobLogWriter(int fd, uint64_t limit);
  // Writes the part of `data` within the head, keeps the rest as the tail.
  void write(std::string_view data);
  // Writes the marker and the tail, if anything went past the head; once.
  void finish();
  uint64_t dropped() const { return past_head_ > tail_.size() ? past_head_ - tail_.size() : 0; }

 private:
  void put(std::string_view bytes);

  int fd_;
  uint64_t head_limit_;
  uint64_t written_ = 0;    // of the head
  uint64_t past_head_ = 0;  // every byte after the head
  std::vector<char> tail_;  // a ring of the last bytes past the head
  size_t tail_capacity_;
  size_t tail_next_ = 0;  // where the ring's next byte goes
  bool finished_ = false;
};

// The files of one job's log.
struct JobLogPaths {
  std::string fifo;  // the job writes here
  std::string log;   // the relay writes here
  std::string code;  // the wrapper writes the exit code here
  std::string exit;  // ... and the relay renames it to here
};

// The relay's loop over `in` (the FIFO's read end); returns when every
// writer has closed it. Used by job_log_main, and by tests over a pipe.
void relay_job_log(int in, JobLogWriter& log, const JobLogPaths& paths);

// Starts `program job-log LIMIT FIFO LOG CODE EXIT` detached (its own
// session, not edtd's child); returns its identity.
Result<proc::ProcessId> start_job_log(const std::string& program, const JobLogPaths& paths, uint64_t limit);

// argv: {"edtd", "job-log", LIMIT, FIFO, LOG, CODE, EXIT}. Returns 0, or 2 with
// a message on stderr for bad arguments or files.
int job_log_main(int argc, char** argv);

}  // namespace edt::control
