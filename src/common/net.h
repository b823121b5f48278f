// Small TCP helpers shared by the rendezvous store and the TCP transport:
// address parsing, listening, connecting with retries, and whole-buffer reads
// and writes with a deadline. All return Status; none raises SIGPIPE.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "edt/status.h"

namespace edt::net {

using Clock = std::chrono::steady_clock;

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// "host:port", "1.2.3.4:5" or "[::1]:5". Port 0 ("any free port") only
// with allow_port_zero.
Result<HostPort> parse_host_port(const std::string& text, bool allow_port_zero = false);

// "host:port", with brackets for IPv6 literals.
std::string format_host_port(const std::string& host, uint16_t port);

// The first IPv4 address of `host` (a name or a dotted quad), as text.
Result<std::string> resolve_ipv4(const std::string& host);

// A listening socket on host:port (port 0 picks a free one). Close-on-exec.
Result<int> listen_tcp(const std::string& host, uint16_t port, int backlog = 128);

// The port a bound socket got.
Result<uint16_t> local_port(int fd);

// The kernel's ephemeral port range (bind to port 0, connect()), low and
// high; Linux's default when /proc does not say.
std::pair<int, int> ephemeral_range();

// A port free on `host` now, for whoever must name a port before the server
// that takes it starts. It comes from outside the ephemeral range, where the
// kernel never hands one out by itself: a port from there could be taken
// by any connect() on the machine before that server binds it.
Result<uint16_t> free_port(const std::string& host);

// Connects, retrying while nobody listens yet, until `deadline`.
Result<int> connect_tcp(const std::string& host, uint16_t port, Clock::time_point deadline);

Status set_nonblocking(int fd, bool on);
Status set_nodelay(int fd);
// Asks for `bytes` of socket send and receive buffer (the kernel may cap it).
void set_buffer_sizes(int fd, int bytes);

// Writes/reads exactly `n` bytes, waiting at most until `deadline`.
// `what` names the peer in errors ("TCP store at 1.2.3.4:5").
// A closed or reset connection is kUnavailable; the deadline is kTimeout.
Status write_all(int fd, const void* data, size_t n, Clock::time_point deadline, const std::string& what);
Status read_all(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& what);

}  // namespace edt::net
