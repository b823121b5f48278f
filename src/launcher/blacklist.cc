#include "launcher/blacklist.h"

#include <algorithm>

#include "common/log.h"

namespace edt::launcher {

Blacklist::Blacklist(std::optional<CooldownRange> cooldown, Now now) : cooldown_(cooldown), now_(std::move(now)) {}

std::optional<std::chrono::milliseconds> Blacklist::add(const std::string& host) {
  Entry& entry = entries_[host];
  ++entry.failures;
  entry.active = true;
  if (!cooldown_) {
    entry.until.reset();
    log::info("host {} is blacklisted", host);
    return std::nullopt;
  }
  auto [low, high] = *cooldown_;
  std::chrono::milliseconds cooldown = std::min(low * (int64_t{1} << std::min(entry.failures - 1, 20)), high);
  entry.until = now_() + cooldown;
  log::info("host {} is blacklisted for {:g} s", host, static_cast<double>(cooldown.count()) / 1000.0);
  return cooldown;
}

bool Blacklist::contains(const std::string& host) {
  auto it = entries_.find(host);
  if (it == entries_.end() || !it->second.active) return false;
  if (it->second.until && now_() >= *it->second.until) {
    log::info("host {} is back from its blacklist cooldown", host);
    it->second.active = false;  // the failure count stays, for the backoff
    return false;
  }
  return true;
}

bool Blacklist::out_for_good(const std::string& host) const {
  auto it = entries_.find(host);
  return it != entries_.end() && it->second.active && !it->second.until;
}

}  // namespace edt::launcher
