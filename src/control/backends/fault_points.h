// Fault points: named places in edtd's create, scale and delete where a test
// can make edtd die, to check that a restart after a crash at that moment
// re-adopts or removes what runs (docs/platform.md, "Crash safety").
//
// EDT_FAULT=<name> in edtd's environment makes edtd abort() (no cleanup, as
// a kill -9 would leave things) the first time it reaches the point of that
// name. kFaultPoints is the one list of them: a name used in the code is
// checked against it when compiling, edtd refuses to start with an
// EDT_FAULT that names no point, and `edtd --fault-points` prints it (the
// fault-injection test, tests/crash, iterates over what it prints).
// Unset, a point costs one comparison of a cached pointer.
#pragma once

#include <string>
#include <string_view>

#include "edt/status.h"

namespace edt::control {

struct FaultPoint {
  std::string_view name;
  // The operations that pass the point, space-separated: create, scale-up,
  // scale-down, delete. The test crashes each of them there.
  std::string_view operations;
  std::string_view where;
};

inline constexpr FaultPoint kFaultPoints[] = {
    {"start.before_spawn", "create scale-up",
     "a container's directory is made, its sandbox not yet started"},
    {"start.spawned", "create scale-up",
     "bubblewrap is started, before it reports the sandbox's pid"},
    {"start.before_record", "create scale-up",
     "the sandbox runs, its pid not yet recorded in the store"},
    {"start.recorded", "create scale-up",
     "the sandbox's pid is recorded, the container not yet Running"},
    {"running.before_record", "create scale-up scale-down",
     "the cluster's files list its containers, its Running phase not yet recorded"},
    {"leave.files_written", "scale-down",
     "the leaving containers are out of the hostfile, not yet drained or signalled"},
    {"leave.signalled", "scale-down delete",
     "a leaving container was sent SIGTERM, its Stopping phase not yet recorded"},
    {"leave.removed", "scale-down delete",
     "a leaving container is gone and its files removed, its row not yet deleted"},
    {"delete.cluster_removed", "delete",
     "a deleted cluster's files are removed, its row not yet deleted"},
};

// A name of kFaultPoints; anything else does not compile.
class FaultPointName {
 public:
  consteval FaultPointName(const char* name) : name_(name) {  // NOLINT: implicit, so fault_point("x") reads well
    bool known = false;
    for (const auto& p : kFaultPoints) known = known || p.name == name_;
    if (!known) throw "not a name of kFaultPoints (fault_points.h)";
  }
  std::string_view name() const { return name_; }

 private:
  std::string_view name_;
};

// Aborts the process if EDT_FAULT names this point.
void fault_point(FaultPointName point);

// Checks EDT_FAULT: unset, empty, or a name of kFaultPoints. The error names
// the points there are.
Status check_fault_setting();

// kFaultPoints as lines "name<TAB>operations<TAB>where".
std::string fault_points_table();

}  // namespace edt::control
