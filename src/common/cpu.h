// How waiting threads use their CPU: the cores this process may run on, and
// a cap, per thread, on how long that thread's waits spin before they yield
// and block (transport/backoff.h spins; the engine's thread, which shares its
// core with the training, caps its own spin).
//
// Threads: usable_cores() from any thread; the spin limit is the calling
// thread's own.
#pragma once

#include <chrono>

namespace edt::cpu {

// How long a wait spins on the pause instruction before it yields: a peer on
// another core answers within this when it answers at once.
inline constexpr std::chrono::nanoseconds kPauseSpin = std::chrono::microseconds(50);

// The cores this process may run on (its affinity mask), at least 1.
int usable_cores();

// Waits on the calling thread spin at most `limit` from now on, whatever
// their transport's spin. Unlimited until called.
void limit_thread_spin(std::chrono::nanoseconds limit);
std::chrono::nanoseconds thread_spin_limit();

}  // namespace edt::cpu
