#include "common/cpu.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace edt::cpu {
namespace {

thread_local std::chrono::nanoseconds t_spin_limit = std::chrono::nanoseconds::max();

}  // namespace

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void limit_thread_spin(std::chrono::nanoseconds limit) { t_spin_limit = limit; }

std::chrono::nanoseconds thread_spin_limit() { return t_spin_limit; }

}  // namespace edt::cpu
