// Waiting on and whole writes to a file descriptor: a file, a pipe or a
// socket; whole files read, written, and replaced in one step.
#pragma once

#include <sys/types.h>

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

// The whole file at `path`; empty when it is missing or cannot be read.
std::string read_file(const std::string& path);

// Creates or truncates `path`, never through a link (a path edtd writes is
// its own file), and writes `content` to it with permissions `mode`.
Status write_file(const std::string& path, std::string_view content, mode_t mode);

// Replaces `path` in one step (`path`.tmp, then rename), so that a reader
// sees the old file or the new one, never a part. Unchanged content is not
// rewritten.
Status replace_file(const std::string& path, std::string_view content, mode_t mode);

}  // namespace edt::io
