// Hosts and their slots, as people write them for horovodrun, mpirun,
// DeepSpeed and the MPI Operator.
//
// One host per line (or per comma-separated entry of -H):
//   host slots=N [max_slots=M]   OpenMPI, DeepSpeed, MPI Operator
//   host:N                       Horovod (-H and hostfiles)
//   host                         one slot
// IPv6 addresses are written bare (`::1`, one slot), in brackets with a slot
// count (`[::1]:4`), or with slots= (`::1 slots=4`). `#` starts a comment;
// blank lines are skipped. A host listed twice is an error naming both lines,
// as is every malformed line (with what to write instead): a hostfile that
// means something other than what its author thinks is never guessed at.
//
// Pure functions over text; safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "edt/status.h"

namespace edt::launcher {

struct HostSlots {
  std::string host;  // as written: a name or an address; the host's identity for edt
  int slots = 1;

  bool operator==(const HostSlots&) const = default;
};

// Parses hostfile text. `source` names it in errors ("hosts.txt" gives
// "hosts.txt:3: ..."). An empty list (only comments) is an error.
Result<std::vector<HostSlots>> parse_hostfile(std::string_view text, const std::string& source);

// Reads and parses the hostfile at `path`.
Result<std::vector<HostSlots>> read_hostfile(const std::string& path);

// Parses the value of -H: "host:N,host2:M,host3". Errors name the entry
// ("-H entry 2 'b:x': ...").
Result<std::vector<HostSlots>> parse_host_list(std::string_view list);

// "a:2,b:1" — the inverse of parse_host_list, for messages.
std::string format_host_list(const std::vector<HostSlots>& hosts);

}  // namespace edt::launcher
