#include "transport/doorbell.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "transport/transport.h"

namespace edt::transport {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(Doorbell, WaitEndsAtTheLimitWithoutARing) {
  Doorbell bell{};
  const auto start = Clock::now();
  bell.wait(bell.arm(), std::chrono::microseconds(30'000));
  EXPECT_GE(Clock::now() - start, 25ms);
  EXPECT_EQ(bell.sleeping.load(), 0u) << "wait() disarms";
}

TEST(Doorbell, ARingBetweenArmAndWaitIsNotLost) {
  Doorbell bell{};
  const uint32_t ticket = bell.arm();
  bell.ring();  // the peer published after the owner's last check
  const auto start = Clock::now();
  bell.wait(ticket, std::chrono::microseconds(5'000'000));
  EXPECT_LT(Clock::now() - start, 1s);
}

TEST(Doorbell, RingWakesASleeperAndSkipsTheKernelOtherwise) {
  Doorbell bell{};
  bell.ring();  // nobody sleeps: only a fence and a load
  EXPECT_EQ(bell.seq.load(), 0u);

  std::atomic<bool> published{false};
  std::atomic<bool> woke{false};
  std::thread owner([&] {
    while (!published.load()) {
      const uint32_t ticket = bell.arm();
      if (published.load()) {
        bell.disarm();
        break;
      }
      bell.wait(ticket, std::chrono::microseconds(10'000'000));
    }
    woke = true;
  });
  while (bell.sleeping.load() == 0) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);  // let it reach the futex
  const auto start = Clock::now();
  published = true;
  bell.ring();
  owner.join();
  EXPECT_TRUE(woke.load());
  EXPECT_LT(Clock::now() - start, 2s) << "the ring must wake it long before its 10 s limit";
}

TEST(Backoff, AThreadsSpinLimitCapsItsWaitsOnly) {
  std::thread limited([] {
    EXPECT_EQ(Backoff(1s).spin_time(), 1s);
    cpu::limit_thread_spin(50us);
    EXPECT_EQ(Backoff(1s).spin_time(), 50us);
    EXPECT_EQ(Backoff(10us).spin_time(), 10us);
  });
  limited.join();
  EXPECT_EQ(Backoff(1s).spin_time(), 1s) << "other threads keep their transport's spin";
}

}  // namespace
}  // namespace edt::transport
