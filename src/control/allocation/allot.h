// Allotting containers inside a database transaction: the addresses and
// GPUs of containers [from, to) of a cluster picked (allocation.h) from what
// the transaction reads as taken, their GPUs held and their rows inserted.
// Both the service (a create or scale placed at once) and the scheduler (a
// queued request placed later, an elastic cluster grown) allot this way, so
// two of them can never pick the same address or GPU. A refusal (no address,
// too few GPUs, a container row that still exists) leaves the transaction to
// be rolled back by its owner.
#pragma once

#include "control/allocation/allocation.h"
#include "control/db/database.h"

namespace edt::control {

Status allot_containers(Database::Tx& tx, const AddressRange& addresses, const ClusterSpec& spec, int from, int to);

}  // namespace edt::control
