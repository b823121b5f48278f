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

// Whether a wait of the calling thread should pause before it yields:
// not for 100 ms after one of its pauses ran out with nothing to show. A
// peer with a core of its own answers within the pause; one that does not
// is most often waiting for a core (more ranks than cores, or the kernel's
// network stack needing the core to deliver its bytes), which a pause only
// holds from it. A wait that yields at once costs a fraction of a
// microsecond more where the pause would have paid.
bool pause_pays(std::chrono::steady_clock::time_point now);
void pause_ran_out(std::chrono::steady_clock::time_point now);

}  // namespace edt::cpu
