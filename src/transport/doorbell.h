// Doorbell: lets a rank that waits on shared memory sleep in the kernel
// instead of spinning, and lets the peer that publishes new state wake it.
//
// One Doorbell per rank lives in shared memory (the rank's control line in
// the segment). Only its owner waits on it, one thread at a time; any rank
// rings it after publishing something the owner may be waiting for (a flag,
// a ring's head or tail). The protocol is the store-buffer pattern with a
// full fence on both sides:
//
//   owner:  arm(): sleeping = 1, fence, ticket = seq
//           re-check the condition; if still unmet, wait(ticket)
//   peer:   publish the state, ring(): fence, if sleeping: ++seq, futex wake
//
// The fences guarantee that the peer sees `sleeping` or the owner sees the
// state, so a wake-up is never lost; a ring that lands between arm() and
// wait() changes `seq`, and the futex wait then returns at once. A ring
// costs a fence and a load of a line that only changes when the owner
// falls asleep, so publishers may ring on every update.
//
// Futexes on a shared mapping work across processes (the non-private kind)
// and between threads of one process alike.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace edt::transport {

struct alignas(64) Doorbell {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> sleeping;

  // Called by the owner before its last check of the wait condition.
  uint32_t arm();
  // Called by the owner when the condition was still unmet after arm():
  // blocks until a ring, `limit`, or a signal, then disarms.
  void wait(uint32_t ticket, std::chrono::microseconds limit);
  // Called by the owner when it stops waiting without calling wait().
  void disarm() { sleeping.store(0, std::memory_order_relaxed); }
  // Called by anyone after publishing state the owner may be waiting for.
  void ring();
};

}  // namespace edt::transport
