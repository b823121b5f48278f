#include "transport/backoff.h"

#include <sched.h>
#include <time.h>

namespace edt::transport {
namespace {

// sched_yield()s after the spin, before sleeping. With a doorbell only a few:
// blocking frees the core as well, and wakes the waiter as soon as it is rung.
constexpr uint32_t kYieldRounds = 2000;
constexpr uint32_t kYieldRoundsBeforeBlocking = 4;
constexpr auto kSlowCheckEvery = std::chrono::milliseconds(100);
// A blocked wait wakes up at least this often for the slow checks (abort()
// rings the doorbell itself).
constexpr auto kBlockLimit = std::chrono::milliseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

bool Backoff::pausing() {
  // Reading the clock costs about as much as a pause: look every 16 idles.
  if (idles_ == 1) {
    const auto now = Clock::now();
    pause_ = cpu::pause_pays(now);
    pause_until_ = now + std::min(spin_, kDefaultSpin);
    spin_until_ = now + spin_;
  }
  if (yields_ > 0 || !pause_) return false;
  if ((idles_ & 15) != 0) return true;
  const auto now = Clock::now();
  if (now < pause_until_) return true;
  cpu::pause_ran_out(now);
  return false;
}

bool Backoff::spin(Clock::time_point since) {
  const auto waited = Clock::now() - since;
  if (waited >= spin_) return false;
  if (spin_ <= kDefaultSpin) {
    cpu_relax();  // a spin no longer than the pause: blocking frees the core next
  } else {
    sched_yield();
  }
  return true;
}

void Backoff::idle(bool may_block) {
  const bool blocking = doorbell_ && may_block;
  if (armed_ && blocking) {
    // The check after arming found nothing either: sleep until rung.
    armed_ = false;
    doorbell_->wait(ticket_, kBlockLimit);
    return;
  }
  disarm();
  ++idles_;
  if (pausing()) {
    cpu_relax();
  } else if (yields_ < (blocking ? kYieldRoundsBeforeBlocking : kYieldRounds) || Clock::now() < spin_until_) {
    ++yields_;
    sched_yield();
  } else if (blocking) {
    ticket_ = doorbell_->arm();
    armed_ = true;
  } else {
    timespec ts{0, 50'000};
    nanosleep(&ts, nullptr);
  }
}

bool Backoff::slow_check_due() {
  // Reading the clock on every spin would cost more than the spin itself.
  if ((idles_ & 1023) != 0 && yields_ == 0) return false;
  auto now = Clock::now();
  if (next_check_ == Clock::time_point{}) {
    next_check_ = now + kSlowCheckEvery;
    return false;
  }
  if (now < next_check_) return false;
  next_check_ = now + kSlowCheckEvery;
  return true;
}

}  // namespace edt::transport
