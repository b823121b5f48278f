// WorkQueue: the keys a controller still has to look at, apart from how it
// looks at them (client-go's rate-limited delaying queue, in small):
//
//   dedup     a key is queued at most once; adding it again keeps the
//             earlier of the two due times.
//   delay     add_after() queues a key for later (a pass that waits for a
//             container to start asks to be run again shortly).
//   backoff   add_rate_limited() queues a key that failed after
//             base * 2^failures (capped at max_backoff); forget() resets its
//             count once a pass succeeds.
//   resync    every resync_period, next() calls the resync callback (on the
//             caller's thread, without the queue's lock), which re-adds
//             every key: a change whose add was lost is still seen.
//
// Thread-safe: add*() from any thread; next() from the one worker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace edt::control {

struct WorkQueueOptions {
  std::chrono::milliseconds base_backoff{100};
  std::chrono::milliseconds max_backoff{30000};
  std::chrono::milliseconds resync_period{2000};
  std::function<void()> resync;  // may call add(); none: no resync
};

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WorkQueue(WorkQueueOptions options);

  void add(const std::string& key);
  void add_after(const std::string& key, std::chrono::milliseconds delay);
  // Counts a failure of `key` and queues it after its backoff; returns the delay.
  std::chrono::milliseconds add_rate_limited(const std::string& key);
  void forget(const std::string& key);
  int failures(const std::string& key);

  // The next due key, removed from the queue; waits for one (running the
  // resync when it is due). nullopt once shut_down() is called.
  std::optional<std::string> next();
  void shut_down();

  size_t size();

 private:
  void add_at(const std::string& key, Clock::time_point when);

  const WorkQueueOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Clock::time_point> due_;  // guarded by mu_
  std::map<std::string, int> failures_;          // guarded by mu_
  Clock::time_point next_resync_;                // guarded by mu_
  bool shutting_down_ = false;                   // guarded by mu_
};

}  // namespace edt::control
