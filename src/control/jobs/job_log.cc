#include "control/jobs/job_log.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>

#include "common/process.h"
#include "common/units.h"

namespace edt::control {

namespace {

constexpr size_t kMaxTail = size_t{1} << 20;
constexpr size_t kReadSize = 65536;
// How often the relay looks for the wrapper's exit code while the job writes.
constexpr auto kCodeCheck = std::chrono::milliseconds(100);

// Writes all of `bytes` to the log file; a failed write (a full disk) drops
// them: the job must not wait on its log.
void write_out(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// The wrapper's shell wrote the code with its umask's mode.
void publish_code(const JobLogPaths& paths) {
  ::chmod(paths.code.c_str(), 0600);
  ::rename(paths.code.c_str(), paths.exit.c_str());
}

}  // namespace

JobLogWriter::JobLogWriter(int fd, uint64_t limit)
    : fd_(fd), tail_capacity_(static_cast<size_t>(std::min<uint64_t>(limit / 4, kMaxTail))) {
  head_limit_ = limit - tail_capacity_;
}

void JobLogWriter::write(std::string_view data) {
  if (written_ < head_limit_) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(data.size(), head_limit_ - written_));
    write_out(fd_, data.substr(0, n));
    written_ += n;
    data.remove_prefix(n);
    if (data.empty()) return;
  }
  if (past_head_ == 0)
    write_out(fd_, "\n[edt: this job's log reached its bound of " + format_size(head_limit_ + tail_capacity_) +
                       " (edtd --job-log-limit); what follows is dropped, except its last " + format_size(tail_capacity_) +
                       ", written when the job ends]\n");
  past_head_ += data.size();
  put(data);
}

void JobLogWriter::put(std::string_view bytes) {
  if (tail_capacity_ == 0) return;
  if (bytes.size() > tail_capacity_) bytes = bytes.substr(bytes.size() - tail_capacity_);
  for (char c : bytes) {
    if (tail_.size() < tail_capacity_) {
      tail_.push_back(c);
    } else {
      tail_[tail_next_] = c;
    }
    tail_next_ = (tail_next_ + 1) % tail_capacity_;
  }
}

void JobLogWriter::finish() {
  if (finished_) return;
  finished_ = true;
  if (past_head_ == 0) return;
  write_out(fd_, "\n[edt: " + std::to_string(dropped()) + " bytes of this job's output were dropped here; its last " +
                     std::to_string(tail_.size()) + " bytes follow]\n");
  // The ring's oldest byte is at tail_next_ once it is full.
  const size_t start = tail_.size() < tail_capacity_ ? 0 : tail_next_;
  write_out(fd_, std::string_view(tail_.data() + start, tail_.size() - start));
  write_out(fd_, std::string_view(tail_.data(), start));
}

void relay_job_log(int in, JobLogWriter& log, const JobLogPaths& paths) {
  ::fcntl(in, F_SETFL, ::fcntl(in, F_GETFL) | O_NONBLOCK);
  std::vector<char> buffer(kReadSize);
  bool ended = false;  // the command's exit code is in paths.exit
  auto last_check = std::chrono::steady_clock::now();
  // Once the exit code is there, what the FIFO holds is the last of the
  // command's output: read it (the pipe holds at most 1 MiB), then end the job.
  auto end_job = [&] {
    for (size_t drained = 0; drained < kMaxTail;) {
      const ssize_t n = ::read(in, buffer.data(), buffer.size());
      if (n <= 0) break;
      log.write(std::string_view(buffer.data(), static_cast<size_t>(n)));
      drained += static_cast<size_t>(n);
    }
    log.finish();
    publish_code(paths);
    ended = true;
  };
  for (;;) {
    pollfd p{in, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(kCodeCheck.count()));
    if (ready < 0 && errno != EINTR) break;
    if (ready > 0) {
      const ssize_t n = ::read(in, buffer.data(), buffer.size());
      if (n == 0) break;  // every writer is gone
      if (n < 0 && errno != EAGAIN && errno != EINTR) break;
      if (n > 0 && !ended) log.write(std::string_view(buffer.data(), static_cast<size_t>(n)));
    }
    const auto now = std::chrono::steady_clock::now();
    if (!ended && (ready == 0 || now - last_check >= kCodeCheck)) {
      last_check = now;
      if (exists(paths.code)) end_job();
    }
  }
  if (!ended) {
    log.finish();
    // The wrapper writes the code before it closes its end: here it is
    // there, unless the wrapper was killed (JobRunner then reports that).
    if (exists(paths.code)) publish_code(paths);
  }
}

Result<proc::ProcessId> start_job_log(const std::string& program, const JobLogPaths& paths, uint64_t limit) {
  const std::vector<std::string> argv = {program,   kJobLogCommand, std::to_string(limit), paths.fifo,
                                         paths.log, paths.code,     paths.exit};
  const std::vector<char*> args = proc::c_strings(argv);
  char* const envp[] = {nullptr};
  int pid_pipe[2];
  if (::pipe2(pid_pipe, O_CLOEXEC) != 0) return io_error("pipe", errno);
  // After fork only async-signal-safe calls: edtd has threads.
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(pid_pipe[0]);
    ::close(pid_pipe[1]);
    return io_error("fork", errno);
  }
  if (child == 0) {
    ::setsid();
    proc::unblock_signals();
    const pid_t grandchild = ::fork();
    if (grandchild != 0) {
      const int64_t pid = grandchild;
      (void)!::write(pid_pipe[1], &pid, sizeof(pid));
      _exit(0);
    }
    const int null = ::open("/dev/null", O_RDWR);
    for (int fd : {0, 1, 2}) ::dup2(null, fd);
    ::close_range(3, ~0u, 0);
    ::execve(args[0], args.data(), envp);
    _exit(127);
  }
  ::close(pid_pipe[1]);
  int64_t pid = 0;
  const ssize_t n = ::read(pid_pipe[0], &pid, sizeof(pid));
  ::close(pid_pipe[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (n != sizeof(pid)) return internal_error("could not start the log writer " + program);
  return proc::identify(pid).value_or(proc::ProcessId{pid, 0});
}

int job_log_main(int argc, char** argv) {
  uint64_t limit = 0;
  const std::string_view text = argc == 7 ? argv[2] : "";
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
  if (argc != 7 || ec != std::errc() || ptr != text.data() + text.size() || limit < kMinJobLogLimit) {
    std::fprintf(stderr, "usage: edtd job-log LIMIT FIFO LOG CODE EXIT (LIMIT in bytes, at least %llu)\n",
                 static_cast<unsigned long long>(kMinJobLogLimit));
    return 2;
  }
  const JobLogPaths paths{argv[3], argv[4], argv[5], argv[6]};
  // Blocks until the job's wrapper opens its end; then the name is not needed.
  const int in = ::open(paths.fifo.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return 2;
  ::unlink(paths.fifo.c_str());
  const int out = ::open(paths.log.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (out < 0) return 2;
  JobLogWriter log(out, limit);
  relay_job_log(in, log, paths);
  return 0;
}

}  // namespace edt::control
