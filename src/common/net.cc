#include "common/net.h"

#include "common/io.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>
#include <algorithm>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

namespace edt::net {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

Result<AddrInfoPtr> resolve(const std::string& host, uint16_t port, bool passive, int family = AF_UNSPEC) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* out = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out);
  if (rc != 0)
    return unavailable("cannot resolve host '" + host + "': " + gai_strerror(rc) +
                       "; check the name or use an IP address");
  return AddrInfoPtr(out);
}

}  // namespace

Result<HostPort> parse_host_port(const std::string& text, bool allow_port_zero) {
  HostPort out;
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return invalid_argument("address '" + text + "' is not [v6addr]:port");
    out.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return invalid_argument("address '" + text + "' is not host:port (for example 127.0.0.1:29400)");
    out.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || (value == 0 && !allow_port_zero) ||
      value > 65535)
    return invalid_argument("address '" + text + "' has port '" + port_text + "'; a port is " +
                            (allow_port_zero ? "0" : "1") + "..65535");
  out.port = static_cast<uint16_t>(value);
  return out;
}

std::string format_host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<std::string> resolve_ipv4(const std::string& host) {
  EDT_ASSIGN_OR_RETURN(AddrInfoPtr ai, resolve(host, 0, false, AF_INET));
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr, text, sizeof(text));
  return std::string(text);
}

Result<int> listen_tcp(const std::string& host, uint16_t port, int backlog) {
  EDT_ASSIGN_OR_RETURN(AddrInfoPtr ai, resolve(host, port, true));
  int last_err = 0;
  for (addrinfo* a = ai.get(); a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, backlog) == 0) return fd;
    last_err = errno;
    ::close(fd);
  }
  return io_error("listen on " + format_host_port(host, port), last_err);
}

Result<uint16_t> local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return io_error("getsockname", errno);
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

std::pair<int, int> ephemeral_range() {
  std::istringstream in(io::read_file("/proc/sys/net/ipv4/ip_local_port_range"));
  int low = 0, high = 0;
  if (in >> low >> high && 0 < low && low <= high && high <= 65535) return {low, high};
  return {32768, 60999};  // Linux's default
}

Result<uint16_t> free_port(const std::string& host) {
  Result<int> probe = listen_tcp(host, 0);  // the host's own errors, once
  if (!probe.is_ok()) return probe.status();
  ::close(*probe);
  constexpr int kLowest = 20000;
  const auto [low, high] = ephemeral_range();
  std::vector<uint16_t> candidates;
  for (int port = kLowest; port <= 65535; ++port)
    if (port < low || port > high) candidates.push_back(static_cast<uint16_t>(port));
  std::mt19937 random(std::random_device{}());
  for (int tries = 0; tries < 200 && !candidates.empty(); ++tries) {
    const uint16_t port = candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(random)];
    Result<int> fd = listen_tcp(host, port);
    if (!fd.is_ok()) continue;
    ::close(*fd);
    return port;
  }
  return unavailable("no port free on " + host + " outside the ephemeral range " + std::to_string(low) + "-" +
                     std::to_string(high) + " (/proc/sys/net/ipv4/ip_local_port_range)");
}

Result<int> connect_tcp(const std::string& host, uint16_t port, Clock::time_point deadline) {
  const std::string where = format_host_port(host, port);
  std::string last_error = "no address";
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    auto ai = resolve(host, port, false);
    if (!ai.is_ok()) return ai.status();
    for (addrinfo* a = ai->get(); a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        last_error = std::strerror(errno);
        continue;
      }
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) return fd;
      last_error = std::strerror(errno);
      ::close(fd);
    }
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  return unavailable("cannot connect to " + where + ": " + last_error +
                     "; is the process that should listen there running?");
}

Status set_nonblocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return io_error("fcntl(F_GETFL)", errno);
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) != 0) return io_error("fcntl(F_SETFL)", errno);
  return Status::ok();
}

Status set_nodelay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) return io_error("TCP_NODELAY", errno);
  return Status::ok();
}

void set_buffer_sizes(int fd, int bytes) {
  // Best effort: the kernel caps these at net.core.[rw]mem_max.
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

Status write_all(int fd, const void* data, size_t n, Clock::time_point deadline, const std::string& what) {
  return io::write_all(fd, std::string_view(static_cast<const char*>(data), n), what, deadline);
}

Status read_all(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return unavailable(what + " is gone: it closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!io::wait_ready(fd, POLLIN, deadline)) return timeout_error("timed out waiting for " + what);
      continue;
    }
    return unavailable(what + " is gone: " + std::strerror(errno));
  }
  return Status::ok();
}

}  // namespace edt::net
