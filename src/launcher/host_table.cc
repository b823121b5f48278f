#include "launcher/host_table.h"

#include <algorithm>

#include "common/log.h"

namespace edt::launcher {

using Clock = std::chrono::steady_clock;

Status HostTable::read_first() {
  next_read_ = Clock::now() + source_->interval();
  EDT_ASSIGN_OR_RETURN(hosts_, source_->poll());
  remember_order();
  return Status::ok();
}

void HostTable::refresh(bool changed) {
  if (!changed && Clock::now() < next_read_) return;
  next_read_ = Clock::now() + source_->interval();
  auto read = source_->poll();
  if (!read.is_ok()) {
    log::info("keeping the previous host list: {}", read.status().message());
    return;
  }
  if (read.value() != hosts_) {
    log::info("host list is now {}", format_host_list(read.value()));
    hosts_ = std::move(read).value();
  }
  remember_order();
}

std::vector<Slot> HostTable::wanted(Blacklist& blacklist, int max_np) const {
  std::vector<HostSlots> ordered = hosts_;
  std::stable_sort(ordered.begin(), ordered.end(),
                   [&](const auto& a, const auto& b) { return order_.at(a.host) < order_.at(b.host); });
  std::vector<Slot> out;
  for (const auto& h : ordered) {
    if (blacklist.contains(h.host)) continue;
    for (int s = 0; s < h.slots && static_cast<int>(out.size()) < max_np; ++s) out.push_back({h.host, s});
  }
  return out;
}

int HostTable::usable_slots(Blacklist& blacklist, int max_np) const {
  int n = 0;
  for (const auto& h : hosts_)
    if (!blacklist.contains(h.host)) n += h.slots;
  return std::min(n, max_np);
}

bool HostTable::any_hope(const Blacklist& blacklist) const {
  return hosts_.empty() ||
         std::any_of(hosts_.begin(), hosts_.end(), [&](const auto& h) { return !blacklist.out_for_good(h.host); });
}

void HostTable::remember_order() {
  for (const auto& h : hosts_) order_.emplace(h.host, static_cast<int64_t>(order_.size()));
}

}  // namespace edt::launcher
