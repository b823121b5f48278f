#include "common/io.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace edt::io {
namespace {

// Waits until fd is writable or the deadline passes; false on timeout.
bool wait_writable(int fd, Clock::time_point deadline) {
  for (;;) {
    int timeout_ms = -1;
    if (deadline != Clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      timeout_ms = static_cast<int>(std::min<long long>(left, 1 << 30));
    }
    pollfd pfd{fd, POLLOUT, 0};
    int r = ::poll(&pfd, 1, timeout_ms);
    if (r > 0) return true;
    if (r == 0 && timeout_ms >= 0) return false;
    if (r < 0 && errno != EINTR) return true;  // let the write report the error
  }
}

}  // namespace

Status write_all(int fd, std::string_view bytes, const std::string& what, Clock::time_point deadline) {
  bool socket = true;
  while (!bytes.empty()) {
    ssize_t n = socket ? ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT) : -1;
    if (n < 0 && socket && errno == ENOTSOCK) {
      socket = false;
      continue;
    }
    if (!socket) n = ::write(fd, bytes.data(), bytes.size());
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_writable(fd, deadline)) return timeout_error("timed out writing to " + what);
      continue;
    }
    int err = n < 0 ? errno : EIO;
    if (socket || err == EPIPE) return unavailable(what + " is gone: " + std::strerror(err));
    return io_error("cannot write to " + what, err);
  }
  return Status::ok();
}

}  // namespace edt::io
