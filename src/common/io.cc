#include "common/io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

namespace edt::io {
namespace {

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

}  // namespace

bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, ms_until(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // let the read/write report the error
  }
}

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
      if (!wait_ready(fd, POLLOUT, deadline)) return timeout_error("timed out writing to " + what);
      continue;
    }
    int err = n < 0 ? errno : EIO;
    if (socket || err == EPIPE) return unavailable(what + " is gone: " + std::strerror(err));
    return io_error("cannot write to " + what, err);
  }
  return Status::ok();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Status write_file(const std::string& path, std::string_view content, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return io_error("create " + path, errno);
  if (Status st = write_all(fd, content, path); !st.is_ok()) {
    ::close(fd);
    return st;
  }
  ::fchmod(fd, mode);
  if (::close(fd) != 0) return io_error("close " + path, errno);
  return Status::ok();
}

Status replace_file(const std::string& path, std::string_view content, mode_t mode) {
  std::ifstream in(path, std::ios::binary);
  if (in && std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()) == content)
    return Status::ok();
  const std::string tmp = path + ".tmp";
  EDT_RETURN_IF_ERROR(write_file(tmp, content, mode));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return io_error("rename " + tmp, errno);
  return Status::ok();
}

}  // namespace edt::io
