#include "common/cpu.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace edt::cpu {
namespace {

using Clock = std::chrono::steady_clock;

thread_local std::chrono::nanoseconds t_spin_limit = std::chrono::nanoseconds::max();
thread_local Clock::time_point t_no_pause_until{};

constexpr auto kNoPauseFor = std::chrono::milliseconds(100);

}  // namespace

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void limit_thread_spin(std::chrono::nanoseconds limit) { t_spin_limit = limit; }

std::chrono::nanoseconds thread_spin_limit() { return t_spin_limit; }

bool pause_pays(Clock::time_point now) { return now >= t_no_pause_until; }

void pause_ran_out(Clock::time_point now) { t_no_pause_until = now + kNoPauseFor; }

}  // namespace edt::cpu
