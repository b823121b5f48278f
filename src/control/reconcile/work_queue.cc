#include "control/reconcile/work_queue.h"

#include <algorithm>

namespace edt::control {

WorkQueue::WorkQueue(WorkQueueOptions options)
    : options_(std::move(options)), next_resync_(Clock::now() + options_.resync_period) {}

void WorkQueue::add(const std::string& key) { add_at(key, Clock::now()); }

void WorkQueue::add_after(const std::string& key, std::chrono::milliseconds delay) {
  add_at(key, Clock::now() + delay);
}

void WorkQueue::add_at(const std::string& key, Clock::time_point when) {
  {
    std::lock_guard lock(mu_);
    auto it = due_.find(key);
    if (it == due_.end() || when < it->second) due_[key] = when;
  }
  cv_.notify_all();
}

std::chrono::milliseconds WorkQueue::add_rate_limited(const std::string& key) {
  std::chrono::milliseconds delay;
  {
    std::lock_guard lock(mu_);
    const int failures = ++failures_[key];
    delay = std::min(options_.max_backoff, options_.base_backoff * (int64_t{1} << std::min(failures, 10)));
  }
  add_after(key, delay);
  return delay;
}

void WorkQueue::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  failures_.erase(key);
}

int WorkQueue::failures(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

size_t WorkQueue::size() {
  std::lock_guard lock(mu_);
  return due_.size();
}

void WorkQueue::shut_down() {
  {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
  }
  cv_.notify_all();
}

std::optional<std::string> WorkQueue::next() {
  std::unique_lock lock(mu_);
  while (!shutting_down_) {
    const auto now = Clock::now();
    if (options_.resync && now >= next_resync_) {
      next_resync_ = now + options_.resync_period;
      lock.unlock();
      options_.resync();
      lock.lock();
      continue;
    }
    auto first = std::min_element(due_.begin(), due_.end(), [](auto& a, auto& b) { return a.second < b.second; });
    if (first != due_.end() && first->second <= now) {
      std::string key = first->first;
      due_.erase(first);
      return key;
    }
    auto wake = options_.resync ? next_resync_ : Clock::time_point::max();
    if (first != due_.end()) wake = std::min(wake, first->second);
    if (wake == Clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, wake);
    }
  }
  return std::nullopt;
}

}  // namespace edt::control
