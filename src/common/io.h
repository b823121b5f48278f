// Waiting on and whole writes to a file descriptor: a file, a pipe or a socket.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "edt/status.h"

namespace edt::io {

using Clock = std::chrono::steady_clock;

// Writes all of `bytes`, retrying short writes and EINTR and waiting while
// the descriptor would block, until `deadline`. Never raises SIGPIPE: a
// closed pipe or connection is kUnavailable; the deadline is kTimeout.
// `what` names the other end in errors ("TCP store at 1.2.3.4:5").
// Waits until `fd` is ready for poll() `events` (POLLIN, POLLOUT) or the
// deadline passes; false on the deadline. An error on the descriptor counts
// as ready: the read or write that follows reports it.
bool wait_ready(int fd, short events, Clock::time_point deadline);

Status write_all(int fd, std::string_view bytes, const std::string& what,
                 Clock::time_point deadline = Clock::time_point::max());

}  // namespace edt::io
