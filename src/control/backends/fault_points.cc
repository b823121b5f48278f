#include "control/backends/fault_points.h"

#include <unistd.h>

#include <cstdlib>

namespace edt::control {

namespace {

std::string_view armed_point() {
  static const char* value = std::getenv("EDT_FAULT");
  return value ? std::string_view(value) : std::string_view();
}

}  // namespace

void fault_point(FaultPointName point) {
  const std::string_view armed = armed_point();
  if (armed.empty() || armed != point.name()) return;
  const std::string line = "edtd: fault point " + std::string(point.name()) + " reached (EDT_FAULT): aborting\n";
  (void)!::write(2, line.data(), line.size());
  std::abort();
}

Status check_fault_setting() {
  const std::string_view armed = armed_point();
  if (armed.empty()) return Status::ok();
  std::string names;
  for (const auto& p : kFaultPoints) {
    if (p.name == armed) return Status::ok();
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  return invalid_argument("EDT_FAULT '" + std::string(armed) + "' names no fault point; unset it, or use one of: " +
                          names + " (edtd --fault-points lists them)");
}

std::string fault_points_table() {
  std::string out;
  for (const auto& p : kFaultPoints)
    out += std::string(p.name) + "\t" + std::string(p.operations) + "\t" + std::string(p.where) + "\n";
  return out;
}

}  // namespace edt::control
