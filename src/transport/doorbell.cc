#include "transport/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace edt::transport {
namespace {

// The futex word is a std::atomic<uint32_t>; the kernel sees its plain value.
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

uint32_t* word(std::atomic<uint32_t>& a) { return reinterpret_cast<uint32_t*>(&a); }

}  // namespace

uint32_t Doorbell::arm() {
  sleeping.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return seq.load(std::memory_order_relaxed);
}

void Doorbell::wait(uint32_t ticket, std::chrono::microseconds limit) {
  const auto us = limit.count();
  timespec ts{static_cast<time_t>(us / 1'000'000), static_cast<long>(us % 1'000'000) * 1000};
  // Returns early with EAGAIN if a ring already moved seq, EINTR on a signal:
  // either way the caller re-checks its condition.
  ::syscall(SYS_futex, word(seq), FUTEX_WAIT, ticket, &ts, nullptr, 0);
  disarm();
}

void Doorbell::ring() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping.load(std::memory_order_relaxed) == 0) return;
  seq.fetch_add(1, std::memory_order_relaxed);
  ::syscall(SYS_futex, word(seq), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace edt::transport
