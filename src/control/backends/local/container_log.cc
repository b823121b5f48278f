#include "control/backends/local/container_log.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <thread>

namespace edt::control {

namespace {

constexpr uid_t kNobody = 65534;

bool write_fully(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Opens `name` under the directory `dir`, never through a link.
int open_in(int dir, const char* name, int flags) {
  return ::openat(dir, name, O_CREAT | O_NOFOLLOW | O_CLOEXEC | flags, 0600);
}

// Nothing the log writer does needs root once its files are open.
bool drop_privileges() {
  if (::geteuid() == 0 && (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
                           setresuid(kNobody, kNobody, kNobody) != 0))
    return false;
  // No way back up, and nobody else's to trace.
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0;
}

}  // namespace

BoundedLog::BoundedLog(int log, int rotated, int ready, int64_t bound)
    : log_(log), rotated_(rotated), ready_fd_(ready), bound_(bound) {
  struct stat st {};
  if (::fstat(log_, &st) == 0) size_ = st.st_size;
}

bool BoundedLog::write(std::string_view bytes) {
  scan(bytes);
  while (!bytes.empty()) {
    const size_t piece = std::min<size_t>(bytes.size(), static_cast<size_t>(std::max<int64_t>(bound_ / 2, 1)));
    if (size_ + static_cast<int64_t>(piece) > bound_ && !rotate()) return false;
    if (!write_fully(log_, bytes.data(), piece)) return false;
    size_ += static_cast<int64_t>(piece);
    bytes.remove_prefix(piece);
  }
  return true;
}

// The log so far over log.1 (copied: renaming would need the directory),
// then `log` again from a marker line.
bool BoundedLog::rotate() {
  if (::ftruncate(rotated_, 0) != 0) return false;
  char buf[65536];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(log_, buf, sizeof(buf), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    if (::pwrite(rotated_, buf, static_cast<size_t>(n), at) != n) return false;
    at += n;
  }
  if (::ftruncate(log_, 0) != 0) return false;
  char marker[160];
  const int len = std::snprintf(marker, sizeof(marker),
                                "edt: this log reached its bound of %lld bytes: what came before is in log.1, "
                                "and anything older is gone\n",
                                static_cast<long long>(bound_));
  size_ = 0;
  if (len > 0 && len < bound_ && write_fully(log_, marker, static_cast<size_t>(len))) size_ = len;
  return true;
}

void BoundedLog::scan(std::string_view bytes) {
  if (ready_) return;
  // The line may begin at the end of the chunk before: in carry_.
  const std::string joined = carry_ + std::string(bytes.substr(0, kReadyLine.size() - 1));
  if (joined.find(kReadyLine) != std::string::npos || bytes.find(kReadyLine) != std::string_view::npos) {
    ready_ = true;
    carry_.clear();
    (void)!::pwrite(ready_fd_, "1\n", 2, 0);
    return;
  }
  const std::string_view tail = bytes.substr(bytes.size() - std::min(bytes.size(), kReadyLine.size() - 1));
  carry_ = std::string(tail);
}

int container_log_main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: edtd container-log DIR (started by edtd beside a container's sandbox)\n");
    return 1;
  }
  const int dir = ::open(argv[2], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  const int log = dir < 0 ? -1 : open_in(dir, "log", O_RDWR | O_APPEND);
  const int rotated = dir < 0 ? -1 : open_in(dir, "log.1", O_WRONLY | O_TRUNC);
  const int ready = dir < 0 ? -1 : open_in(dir, "ready", O_WRONLY | O_TRUNC);
  if (log < 0 || rotated < 0 || ready < 0) {
    std::fprintf(stderr, "edtd container-log: open the log files in %s: %s\n", argv[2], std::strerror(errno));
    return 1;
  }
  ::close(dir);
  // It runs in the container's cgroups (its CPU is the container's), where
  // the OOM killer should take the container's own processes, not it.
  if (const int adj = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); adj >= 0) {
    (void)!::write(adj, "-1000", 5);
    ::close(adj);
  }
  if (!drop_privileges()) {
    static constexpr char kWhy[] = "edtd container-log: could not drop its privileges\n";
    (void)!::write(log, kWhy, sizeof(kWhy) - 1);
    return 1;
  }
  BoundedLog bounded(log, rotated, ready);
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(0, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? 0 : 1;
    // A failed write (a full disk) drops the chunk: the container must not
    // block on its own log.
    (void)bounded.write(std::string_view(buf, static_cast<size_t>(n)));
  }
}

std::string container_log_tail(const std::string& dir, size_t bytes) {
  const int fd = ::open((dir + "/log").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    const off_t from = std::max<off_t>(0, st.st_size - static_cast<off_t>(bytes));
    out.resize(static_cast<size_t>(st.st_size - from));
    const ssize_t n = ::pread(fd, out.data(), out.size(), from);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return out;
}

// How long start() waits for the log writer to have written what a sandbox
// that failed said, before it quotes the log's tail.
constexpr auto kLastWordsWait = std::chrono::seconds(2);

std::string last_words(const std::string& dir, const proc::ProcessId& writer) {
  const auto deadline = std::chrono::steady_clock::now() + kLastWordsWait;
  while (proc::alive(writer) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return container_log_tail(dir);
}

Status with_last_words(const Status& st, const std::string& dir, const proc::ProcessId& writer) {
  const std::string log = last_words(dir, writer);
  return log.empty() ? st : Status(st.code(), st.message() + "; the sandbox said: " + log);
}

}  // namespace edt::control
