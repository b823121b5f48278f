// Which rank runs on which host, and the rank numbers each worker is told.
//
// Slots are filled host by host in the order the hosts were given, so the
// ranks of one host are consecutive and rank 0 is on the first host. Hosts
// the job does not reach (-np smaller than the slots) get no worker.
//
// local_rank/local_size count the workers of one host. cross_rank/cross_size
// follow Horovod: the workers with the same local_rank on different hosts
// form a "cross" group, numbered in host order; on a host list a:2,b:1 with
// -np 3, local rank 0 has cross_size 2 (a, b) and local rank 1 has 1 (a).
#pragma once

#include <string>
#include <vector>

#include "edt/status.h"
#include "launcher/hostfile.h"

namespace edt::launcher {

struct SlotInfo {
  std::string host;  // as given in the host list
  int host_index = 0;  // position among the hosts that run workers
  int rank = 0;
  int size = 0;
  int local_rank = 0;
  int local_size = 0;
  int cross_rank = 0;
  int cross_size = 0;

  bool operator==(const SlotInfo&) const = default;
};

// One SlotInfo per rank, in rank order. `hosts_source` says where the hosts
// came from ("--hostfile h.txt", "-H", "the default localhost:N") for the
// error when `np` exceeds the slots.
Result<std::vector<SlotInfo>> assign_slots(const std::vector<HostSlots>& hosts, int np, const std::string& hosts_source);

}  // namespace edt::launcher
