#include "control/reconcile/reconcile_loop.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>

namespace edt::control {
namespace {

using std::chrono::milliseconds;

// One scripted pass: its error, or else the requeue it asks for.
struct Pass {
  Status error;
  std::optional<milliseconds> requeue_after;
};

// A domain that records each pass and answers what the test scripted: per
// key, a list of passes taken in order (the last one repeats).
class Scripted : public Reconcilable {
 public:
  explicit Scripted(std::vector<std::string> keys) : keys_(std::move(keys)) {}

  void script(const std::string& key, std::vector<Pass> outcomes) {
    std::lock_guard lock(mu_);
    outcomes_[key] = std::move(outcomes);
  }
  Result<ReconcileResult> reconcile(const std::string& key) override {
    std::lock_guard lock(mu_);
    passes_.push_back({key, std::chrono::steady_clock::now()});
    cv_.notify_all();
    auto& list = outcomes_[key];
    if (list.empty()) return ReconcileResult{};
    const Pass next = list.front();
    if (list.size() > 1) list.erase(list.begin());
    if (!next.error.is_ok()) return next.error;
    return ReconcileResult{next.requeue_after};
  }
  std::vector<std::string> keys() override { return keys_; }
  void after_pass(const std::string& key, const Status& outcome) override {
    std::lock_guard lock(mu_);
    if (!outcome.is_ok()) failed_.push_back(key);
  }
  void after_resync() override {
    std::lock_guard lock(mu_);
    ++resyncs_;
    cv_.notify_all();
  }

  // Waits until `key` had `n` passes; their times.
  std::vector<std::chrono::steady_clock::time_point> wait_passes(const std::string& key, size_t n) {
    std::unique_lock lock(mu_);
    std::vector<std::chrono::steady_clock::time_point> times;
    cv_.wait_for(lock, std::chrono::seconds(10), [&] {
      times.clear();
      for (const auto& [k, t] : passes_)
        if (k == key) times.push_back(t);
      return times.size() >= n;
    });
    return times;
  }
  bool wait_resyncs(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return resyncs_ >= n; });
  }
  std::vector<std::string> failed() {
    std::lock_guard lock(mu_);
    return failed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> keys_;
  std::map<std::string, std::vector<Pass>> outcomes_;
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> passes_;
  std::vector<std::string> failed_;
  int resyncs_ = 0;
};

ReconcileLoopOptions options(milliseconds resync = milliseconds(60000)) {
  return {.base_backoff = milliseconds(40), .max_backoff = milliseconds(1000), .resync = resync};
}

TEST(ReconcileLoopTest, StartPassesEveryKeyTheDomainLists) {
  Scripted domain({"a", "b"});
  ReconcileLoop loop(&domain, options());
  loop.start();
  EXPECT_EQ(domain.wait_passes("a", 1).size(), 1u);
  EXPECT_EQ(domain.wait_passes("b", 1).size(), 1u);
  loop.stop();
  EXPECT_EQ(loop.stats().passes, 2u);
}

TEST(ReconcileLoopTest, AnErrorIsRetriedWithGrowingBackoffAndTheDomainHearsOfIt) {
  Scripted domain({"a"});
  domain.script("a", {{internal_error("one"), std::nullopt}, {internal_error("two"), std::nullopt}, {}});
  ReconcileLoop loop(&domain, options());
  loop.start();
  auto times = domain.wait_passes("a", 3);
  loop.stop();
  ASSERT_EQ(times.size(), 3u);
  const auto first_wait = times[1] - times[0], second_wait = times[2] - times[1];
  // The work queue's backoff from a base of 40 ms: 80 ms, then twice that.
  EXPECT_GE(first_wait, milliseconds(80));
  EXPECT_GE(second_wait, milliseconds(160));
  EXPECT_EQ(domain.failed(), (std::vector<std::string>{"a", "a"}));
  EXPECT_EQ(loop.stats().errors, 2u);
}

TEST(ReconcileLoopTest, ARequeueComesBackAfterItsDelayAndDoneStaysDone) {
  Scripted domain({"a"});
  domain.script("a", {{Status::ok(), milliseconds(50)}, {}});
  ReconcileLoop loop(&domain, options());
  loop.start();
  auto times = domain.wait_passes("a", 2);
  ASSERT_EQ(times.size(), 2u);
  EXPECT_GE(times[1] - times[0], milliseconds(50));
  loop.enqueue("a");  // done keys come back only when asked for
  EXPECT_EQ(domain.wait_passes("a", 3).size(), 3u);
  loop.stop();
}

TEST(ReconcileLoopTest, AResyncQueuesEveryKeyAgainUnasked) {
  Scripted domain({"a", "b"});
  ReconcileLoop loop(&domain, options(milliseconds(50)));
  loop.start();
  EXPECT_TRUE(domain.wait_resyncs(2));
  EXPECT_GE(domain.wait_passes("b", 2).size(), 2u);
  loop.stop();
}

}  // namespace
}  // namespace edt::control
