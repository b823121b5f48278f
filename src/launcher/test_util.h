// Helpers shared by the launcher's tests.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "common/process.h"
#include "launcher/process.h"

namespace edt::launcher::test_util {

// Running, not a zombie waiting for its new parent (an init that may be slow
// to reap) to collect it.
inline bool alive(pid_t pid) {
  auto stat = proc::read_stat(pid);
  return stat && !stat->zombie();
}

inline bool wait_until_dead(pid_t pid, std::chrono::milliseconds limit = std::chrono::milliseconds(3000)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (alive(pid) && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return !alive(pid);
}

inline ExitStatus wait_exit(Process& p) {
  for (int i = 0; i < 20000; ++i) {
    if (auto status = p.poll_exit()) return *status;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ADD_FAILURE() << "process did not exit";
  return {};
}

// One line from a non-blocking fd, without its newline; "<timeout>" after 10 s.
inline std::string read_line(int fd) {
  std::string line;
  char c;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) return line + "<timeout>";
    ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EAGAIN) continue;
    if (n <= 0 || c == '\n') return line;
    line += c;
  }
}

// Everything until end of file.
inline std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) return text + "<timeout>";
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EAGAIN) continue;
    if (n <= 0) return text;
    text.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace edt::launcher::test_util
