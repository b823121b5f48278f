#include "launcher/placement.h"

#include <algorithm>

namespace edt::launcher {

Result<std::vector<SlotInfo>> assign_slots(const std::vector<HostSlots>& hosts, int np, const std::string& hosts_source) {
  if (np < 1) {
    return invalid_argument("-np " + std::to_string(np) + " asks for no workers; give -np N with N at least 1");
  }
  long total = 0;
  for (const auto& h : hosts) total += h.slots;
  if (np > total) {
    return invalid_argument("-np " + std::to_string(np) + " asks for more workers than the " + std::to_string(total) +
                            " slots of " + hosts_source + " (" + format_host_list(hosts) +
                            "); lower -np or add hosts or slots");
  }
  std::vector<SlotInfo> slots;
  for (int host_index = 0; static_cast<int>(slots.size()) < np; ++host_index) {
    const HostSlots& host = hosts[host_index];
    int local_size = std::min(host.slots, np - static_cast<int>(slots.size()));
    for (int local_rank = 0; local_rank < local_size; ++local_rank) {
      SlotInfo slot;
      slot.host = host.host;
      slot.host_index = host_index;
      slot.rank = static_cast<int>(slots.size());
      slot.size = np;
      slot.local_rank = local_rank;
      slot.local_size = local_size;
      slots.push_back(slot);
    }
  }
  // Cross groups: hosts are visited in order, so counting earlier hosts with
  // the same local rank gives cross_rank.
  for (auto& slot : slots) {
    for (const auto& other : slots) {
      if (other.local_rank != slot.local_rank) continue;
      if (other.host_index < slot.host_index) ++slot.cross_rank;
      ++slot.cross_size;
    }
  }
  return slots;
}

}  // namespace edt::launcher
