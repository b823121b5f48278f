#include "control/allocation/allocation.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace edt::control {

Result<AddressRange> AddressRange::parse(const std::string& cidr) {
  auto slash = cidr.find('/');
  const std::string fix = "; write a block inside 127.0.0.0/8 such as 127.77.0.0/16";
  if (slash == std::string::npos) return invalid_argument("address range '" + cidr + "' has no /prefix" + fix);
  in_addr addr{};
  if (inet_pton(AF_INET, cidr.substr(0, slash).c_str(), &addr) != 1)
    return invalid_argument("address range '" + cidr + "' is not an IPv4 address" + fix);
  int prefix = -1;
  const char* end = cidr.data() + cidr.size();
  auto [ptr, ec] = std::from_chars(cidr.data() + slash + 1, end, prefix);
  if (ec != std::errc() || ptr != end) prefix = -1;
  if (prefix < 8 || prefix > 30) return invalid_argument("address range '" + cidr + "' needs a prefix from /8 to /30" + fix);
  AddressRange range;
  range.size = 1u << (32 - prefix);
  range.base = ntohl(addr.s_addr) & ~(range.size - 1);
  if ((range.base >> 24) != 127) return invalid_argument("address range '" + cidr + "' is outside 127.0.0.0/8" + fix);
  if (range.base <= 0x7f000001 && 0x7f000001 < range.base + range.size)
    return invalid_argument("address range '" + cidr + "' contains 127.0.0.1" + fix);
  return range;
}

std::string AddressRange::address(uint32_t offset) const {
  in_addr addr{};
  addr.s_addr = htonl(base + offset);
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &addr, text, sizeof(text));
  return text;
}

std::string AddressRange::cidr() const { return address(0) + "/" + std::to_string(32 - __builtin_ctz(size)); }

Outcome<std::vector<std::string>> pick_addresses(const AddressRange& range, const std::set<std::string>& taken,
                                                 int count) {
  std::vector<std::string> picked;
  for (uint32_t offset = 1; offset + 1 < range.size && static_cast<int>(picked.size()) < count; ++offset) {
    std::string candidate = range.address(offset);
    if (!taken.count(candidate)) picked.push_back(std::move(candidate));
  }
  if (static_cast<int>(picked.size()) < count)
    return conflict("containers", "no free address is left in " + range.cidr(),
                    "delete a cluster, or start edtd with a larger --address-range");
  return picked;
}

Outcome<std::vector<std::vector<int>>> pick_gpus(const std::vector<Gpu>& inventory, const std::string& model,
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
