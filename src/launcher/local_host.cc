#include "launcher/local_host.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

namespace edt::launcher {
namespace {

// The canonical text of an IPv4 or IPv6 address; nullopt for a name.
std::optional<std::string> normalize_address(const std::string& text) {
  char buffer[INET6_ADDRSTRLEN];
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return std::string(inet_ntop(AF_INET, &v4, buffer, sizeof buffer));
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) return std::string(inet_ntop(AF_INET6, &v6, buffer, sizeof buffer));
  return std::nullopt;
}

}  // namespace

LocalIdentity LocalIdentity::of_this_machine() {
  char hostname[256] = {};
  gethostname(hostname, sizeof hostname - 1);
  std::vector<std::string> addresses;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
      if (it->ifa_addr == nullptr) continue;
      char buffer[INET6_ADDRSTRLEN];
      if (it->ifa_addr->sa_family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(it->ifa_addr);
        addresses.emplace_back(inet_ntop(AF_INET, &a->sin_addr, buffer, sizeof buffer));
      } else if (it->ifa_addr->sa_family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(it->ifa_addr);
        addresses.emplace_back(inet_ntop(AF_INET6, &a->sin6_addr, buffer, sizeof buffer));
      }
    }
    freeifaddrs(list);
  }
  return LocalIdentity(hostname, addresses);
}

LocalIdentity::LocalIdentity(const std::string& hostname, const std::vector<std::string>& addresses) {
  names_ = {"localhost"};
  if (!hostname.empty()) {
    names_.insert(hostname);
    names_.insert(hostname.substr(0, hostname.find('.')));
  }
  addresses_ = {"127.0.0.1", "::1"};
  for (const auto& a : addresses) {
    if (auto normal = normalize_address(a)) addresses_.insert(*normal);
  }
}

bool LocalIdentity::is_local(const std::string& host) const {
  if (auto normal = normalize_address(host)) return addresses_.count(*normal) > 0;
  return names_.count(host) > 0;
}

// Connecting a UDP socket sends nothing; it only picks the route.
Result<std::string> address_toward(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), "22", &hints, &found);
  if (rc != 0) {
    return unavailable("cannot resolve host '" + host + "': " + gai_strerror(rc) + "; check the host list and DNS");
  }
  std::string result;
  int err = 0;
  for (addrinfo* a = found; a != nullptr && result.empty(); a = a->ai_next) {
    int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* raw = local.ss_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                                                   : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, raw, text, sizeof text) != nullptr) result = text;
    } else {
      err = errno;
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (result.empty()) return io_error("no route from this machine to host '" + host + "'", err);
  return result;
}

}  // namespace edt::launcher
