// Backoff: the idle strategy every wait of the transport uses.
//
// It spins with a pause instruction first (a peer on another core answers
// within a microsecond), then yields, then blocks until a peer rings this
// rank's doorbell (or, without one, sleeps briefly; a caller that waits on
// sockets polls them instead), so that ranks sharing a core let each other run
// and a waiting rank wakes as soon as there is something to do.
//
// The spin is bounded in time, not in pause instructions (a pause takes 10
// to 150 cycles depending on the CPU). It pauses for at most cpu::kPauseSpin,
// then yields the core (to any thread that wants it) until `spin` has
// passed. A pause that runs out makes the thread's waits of the next 100 ms
// yield at once (cpu::pause_pays): a peer that did not answer within it was
// most often waiting for a core. A long spin pays when every rank has a
// core of its own: the waiting rank's core has nothing else to do, and a
// core that goes idle comes back late and with cold caches (a virtual CPU
// that halts gives its physical core to others), which in a training step
// slows the next forward and backward pass; yielding hands the core over
// where something else needs it. With more ranks than cores on a host the
// communicator asks for a short spin, and a thread that shares its core
// with the training (the engine's) limits its own (cpu::limit_thread_spin).
//
// Use: check the wait condition; on progress call reset(), otherwise idle(),
// and check again. Before blocking, idle() arms the doorbell and returns at
// once, so that the condition is checked once more with the doorbell armed
// (see doorbell.h); the next idle() then blocks. A caller that blocks its own
// way (poll() on sockets) calls spin() instead of idle() and blocks once it
// returns false. spin() yields from the start, without the pause: what a
// socket brings arrives through the kernel, tens of microseconds after the
// peer sent it, so a yield's fraction of a microsecond costs nothing, and
// where the ranks outnumber the cores (or the kernel's network stack needs
// the core to deliver the bytes) a pause holds the core from the very
// process that would send them (4 KiB allreduce, 4 ranks sharing 2 cores
// across 2 shaped links: 211 us pausing for 50 us first, 85 us yielding).
// A spin no longer than the pause (the engine's) pauses, as blocking frees
// the core right after it: yielding there switched to the training and back
// for nothing (a training step across 2 hosts hid 10-12% of its allreduce
// behind the backward pass instead of 15-18%).
//
// Threads: one Backoff per wait, used by the waiting thread only.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "common/cpu.h"
#include "transport/doorbell.h"

namespace edt::transport {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::nanoseconds kDefaultSpin = cpu::kPauseSpin;

  explicit Backoff(std::chrono::nanoseconds spin = kDefaultSpin, Doorbell* doorbell = nullptr)
      : spin_(std::min(spin, cpu::thread_spin_limit())), doorbell_(doorbell) {}
  ~Backoff() { disarm(); }
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;

  // `may_block`: whether everything waited for rings the doorbell (false
  // while sockets are waited on too: they do not ring it).
  void idle(bool may_block = true);
  // One step of the spin alone, for a caller whose check of the condition
  // costs a system call (sockets) and who blocks its own way (poll()): a
  // yield (a pause when `spin` is no longer than the pause), and true;
  // false once `spin` has passed `since` (the last progress), when the
  // caller should block. The clock is read on every call, so the spin ends
  // on time.
  bool spin(Clock::time_point since);
  void reset() {
    idles_ = 0;
    yields_ = 0;
    disarm();
  }
  // True about every 100 ms of idling: time for the slow checks.
  bool slow_check_due();
  std::chrono::nanoseconds spin_time() const { return spin_; }

 private:
  bool pausing();
  void disarm() {
    // armed_ implies a doorbell; the test of both spares GCC a false
    // "null store" warning.
    if (armed_ && doorbell_) doorbell_->disarm();
    armed_ = false;
  }

  std::chrono::nanoseconds spin_;
  Doorbell* doorbell_;
  uint32_t idles_ = 0;   // idle() and spin() calls since progress
  uint32_t yields_ = 0;  // of which yielded
  bool pause_ = true;    // this wait pauses first (cpu::pause_pays)
  Clock::time_point pause_until_{};
  Clock::time_point spin_until_{};
  bool armed_ = false;
  uint32_t ticket_ = 0;
  Clock::time_point next_check_{};
};

}  // namespace edt::transport
