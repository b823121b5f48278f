#include "control/reconcile/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace edt::control {
namespace {

using std::chrono::milliseconds;
using Clock = WorkQueue::Clock;

WorkQueueOptions no_resync() {
  WorkQueueOptions options;
  options.base_backoff = milliseconds(10);
  options.max_backoff = milliseconds(50);
  return options;
}

TEST(WorkQueue, AKeyIsQueuedOnceAndTheEarlierDueTimeWins) {
  WorkQueue queue(no_resync());
  queue.add_after("a", milliseconds(10000));
  queue.add("a");
  queue.add("a");
  queue.add_after("a", milliseconds(10000));
  EXPECT_EQ(queue.size(), 1u);
  const auto before = Clock::now();
  EXPECT_EQ(queue.next(), "a");
  EXPECT_LT(Clock::now() - before, milliseconds(1000));
  EXPECT_EQ(queue.size(), 0u);
}

TEST(WorkQueue, DelayedKeysComeWhenDueInDueOrder) {
  WorkQueue queue(no_resync());
  const auto before = Clock::now();
  queue.add_after("late", milliseconds(60));
  queue.add_after("soon", milliseconds(20));
  EXPECT_EQ(queue.next(), "soon");
  EXPECT_GE(Clock::now() - before, milliseconds(20));
  EXPECT_EQ(queue.next(), "late");
  EXPECT_GE(Clock::now() - before, milliseconds(60));
}

TEST(WorkQueue, FailuresBackOffExponentiallyUpToTheCapAndForgetResets) {
  WorkQueue queue(no_resync());
  EXPECT_EQ(queue.add_rate_limited("a"), milliseconds(20));
  EXPECT_EQ(queue.add_rate_limited("a"), milliseconds(40));
  EXPECT_EQ(queue.add_rate_limited("a"), milliseconds(50));
  EXPECT_EQ(queue.failures("a"), 3);
  EXPECT_EQ(queue.add_rate_limited("b"), milliseconds(20));  // per key
  queue.forget("a");
  EXPECT_EQ(queue.failures("a"), 0);
  EXPECT_EQ(queue.add_rate_limited("a"), milliseconds(20));
}

TEST(WorkQueue, ResyncReaddsKeysPeriodically) {
  WorkQueueOptions options = no_resync();
  options.resync_period = milliseconds(30);
  std::atomic<int> resyncs{0};
  WorkQueue* self = nullptr;
  options.resync = [&] {
    resyncs++;
    self->add("every");
  };
  WorkQueue queue(options);
  self = &queue;
  const auto before = Clock::now();
  EXPECT_EQ(queue.next(), "every");
  EXPECT_GE(Clock::now() - before, milliseconds(30));
  EXPECT_EQ(queue.next(), "every");
  EXPECT_EQ(resyncs.load(), 2);
}

TEST(WorkQueue, ShutDownWakesTheWorker) {
  WorkQueue queue(no_resync());
  std::optional<std::string> got = "unset";
  std::thread worker([&] { got = queue.next(); });
  std::this_thread::sleep_for(milliseconds(20));
  queue.shut_down();
  worker.join();
  EXPECT_FALSE(got.has_value());
}

}  // namespace
}  // namespace edt::control
