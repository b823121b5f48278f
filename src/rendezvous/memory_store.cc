#include <charconv>

#include "edt/store.h"

namespace edt {

Status wait_timeout_error(const std::vector<std::string>& keys, Store::Duration timeout) {
  std::string names;
  for (const auto& key : keys) names += (names.empty() ? "" : ", ") + key;
  return timeout_error("waited " + std::to_string(timeout.count()) + " ms for key(s) " + names +
                       " in the rendezvous store; a peer did not arrive or the coordinator is gone");
}

Status PrefixStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  std::vector<std::string> scoped;
  scoped.reserve(keys.size());
  for (const auto& key : keys) scoped.push_back(k(key));
  return base_->wait(scoped, timeout);
}

Status MemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard lock(mu_);
    data_[key] = value;
  }
  changed_.notify_all();
  return Status::ok();
}

Result<std::string> MemoryStore::get(const std::string& key, Duration timeout) {
  EDT_RETURN_IF_ERROR(wait({key}, timeout));
  std::lock_guard lock(mu_);
  auto it = data_.find(key);
  if (it == data_.end()) return not_found("key '" + key + "' was erased while waiting for it");
  return it->second;
}

Result<std::optional<std::string>> MemoryStore::try_get(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = data_.find(key);
  if (it == data_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Result<int64_t> MemoryStore::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    std::lock_guard lock(mu_);
    std::string& stored = data_[key];
    if (!stored.empty()) {
      auto [end, ec] = std::from_chars(stored.data(), stored.data() + stored.size(), value);
      if (ec != std::errc() || end != stored.data() + stored.size())
        return invalid_argument("key '" + key + "' holds '" + stored + "', not an integer; add() needs a counter");
    }
    if (__builtin_add_overflow(value, delta, &value))
      return invalid_argument("key '" + key + "' holds " + stored + "; adding " + std::to_string(delta) +
                              " would overflow its 64-bit counter");
    stored = std::to_string(value);
  }
  changed_.notify_all();
  return value;
}

Result<std::string> MemoryStore::compare_set(const std::string& key, const std::string& expected,
                                             const std::string& desired) {
  std::string now;
  {
    std::lock_guard lock(mu_);
    auto it = data_.find(key);
    const std::string current = it == data_.end() ? std::string() : it->second;
    if (current == expected) {
      data_[key] = desired;
      now = desired;
    } else {
      now = current;
    }
  }
  changed_.notify_all();
  return now;
}

Status MemoryStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  std::unique_lock lock(mu_);
  auto all_set = [&] {
    for (const auto& key : keys)
      if (!data_.count(key)) return false;
    return true;
  };
  if (!changed_.wait_for(lock, timeout, all_set)) return wait_timeout_error(keys, timeout);
  return Status::ok();
}

Result<bool> MemoryStore::erase(const std::string& key) {
  std::lock_guard lock(mu_);
  return data_.erase(key) > 0;
}

}  // namespace edt
