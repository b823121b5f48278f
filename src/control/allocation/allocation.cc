#include "control/allocation/allocation.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace edt::control {

namespace {

// The checks of a range that depend on the mode; "" when it is good.
std::string refusal(uint32_t base, uint32_t size, NetworkMode mode) {
  const uint32_t top = base >> 24;
  if (mode == NetworkMode::kLoopback) {
    if (top != 127) return "is outside 127.0.0.0/8";
    if (base <= 0x7f000001 && 0x7f000001 < base + size) return "contains 127.0.0.1";
    return "";
  }
  if (top == 127) return "is loopback, which a bridge cannot carry";
  if (top == 0 || top >= 224) return "is not a unicast block";
  if (top == 169 && ((base >> 16) & 0xff) == 254) return "is link-local";
  return "";
}

}  // namespace

Result<AddressRange> AddressRange::parse(const std::string& cidr, NetworkMode mode) {
  auto slash = cidr.find('/');
  const std::string fix = mode == NetworkMode::kLoopback
                              ? "; write a block inside 127.0.0.0/8 such as 127.77.0.0/16"
                              : "; write a unicast block outside 127.0.0.0/8 that the host does not use, such as "
                                "198.19.0.0/16";
  if (slash == std::string::npos) return invalid_argument("address range '" + cidr + "' has no /prefix" + fix);
  in_addr addr{};
  if (inet_pton(AF_INET, cidr.substr(0, slash).c_str(), &addr) != 1)
    return invalid_argument("address range '" + cidr + "' is not an IPv4 address" + fix);
  int prefix = -1;
  const char* end = cidr.data() + cidr.size();
  auto [ptr, ec] = std::from_chars(cidr.data() + slash + 1, end, prefix);
  if (ec != std::errc() || ptr != end) prefix = -1;
  const int longest = mode == NetworkMode::kLoopback ? 30 : 29;  // a bridge's block also holds its gateway
  if (prefix < 8 || prefix > longest)
    return invalid_argument("address range '" + cidr + "' needs a prefix from /8 to /" + std::to_string(longest) + fix);
  AddressRange range;
  range.size = 1u << (32 - prefix);
  range.base = ntohl(addr.s_addr) & ~(range.size - 1);
  range.first = mode == NetworkMode::kLoopback ? 1 : 2;
  if (std::string why = refusal(range.base, range.size, mode); !why.empty())
    return invalid_argument("address range '" + cidr + "' " + why + fix);
  return range;
}

std::string AddressRange::address(uint32_t offset) const {
  in_addr addr{};
  addr.s_addr = htonl(base + offset);
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &addr, text, sizeof(text));
  return text;
}

std::string AddressRange::cidr() const { return address(0) + "/" + std::to_string(prefix()); }

Result<std::vector<std::string>> pick_addresses(const AddressRange& range, const std::set<std::string>& taken,
                                                 int count) {
  std::vector<std::string> picked;
  for (uint32_t offset = range.first; offset + 1 < range.size && static_cast<int>(picked.size()) < count; ++offset) {
    std::string candidate = range.address(offset);
    if (!taken.count(candidate)) picked.push_back(std::move(candidate));
  }
  if (static_cast<int>(picked.size()) < count)
    return conflict("containers", "no free " + (range.what.empty() ? "address is left in " + range.cidr() : range.what),
                    "delete a cluster, or start edtd with a larger " +
                        (range.larger.empty() ? std::string("--address-range") : range.larger));
  return picked;
}

Result<std::vector<std::vector<int>>> pick_gpus(const std::vector<Gpu>& inventory, const std::string& model,
                                                 int per_container, int containers) {
  std::vector<std::vector<int>> picked(static_cast<size_t>(std::max(containers, 0)));
  if (per_container <= 0) return picked;
  std::vector<int> free;
  for (const auto& gpu : inventory)
    if (gpu.model == model && gpu.holder.empty()) free.push_back(gpu.index);
  std::sort(free.begin(), free.end());
  if (free.size() < static_cast<size_t>(per_container) * picked.size())
    return conflict("gpu.count", "not enough free " + model + " GPUs", "ask for fewer");
  size_t next = 0;
  for (auto& gpus : picked)
    for (int i = 0; i < per_container; ++i) gpus.push_back(free[next++]);
  return picked;
}

}  // namespace edt::control
