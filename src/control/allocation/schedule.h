// The scheduler's step inside a database transaction: edtd's state read into
// the policy's snapshot (sched/policy.h), the policy asked, and its
// decisions carried out in the same transaction, so that what it decided on
// is what it changes:
//   admit   a queued create or scale gets its containers (allot.h), its
//           phase Creating or Scaling, a Scheduled event; its queue entry goes;
//   grow    an elastic cluster gets containers up to the new count;
//   shrink  the highest containers leave, exactly as a scale down: they leave
//           the hostfile and drain at their job's next commit (reconciler.h);
//   wait    the queued request's position and reason are recorded.
// Clusters without GPUs are not the scheduler's: they are placed at once.
// Users without a team, and teams without a quota for a model, have no
// guarantee and no limit there (teams.h).
//
// The service runs this step in the transaction of a create, scale or delete
// (so a request that fits is placed before the answer), and the reconciler
// on its schedule key on every change of GPUs, clusters or quotas and every
// resync. Not thread-safe by itself: the transaction serialises it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/allocation/allocation.h"
#include "control/db/database.h"
#include "sched/policy.h"

namespace edt::control {

// The policy's view of what `tx` reads: every team with its quotas (a model
// without one: {0, unlimited}; users without a team in a team of their own,
// named ""), every GPU cluster not being deleted, and the pools of free and
// releasing (held by leaving containers) GPUs per model. `now_ms` (unix
// milliseconds) dates each cluster's service (sched::Cluster::service_gpu_s):
// the GPU-seconds its running containers have held.
sched::Snapshot schedule_snapshot(Database::Tx& tx, int64_t now_ms);

// Asks the policy and carries out its decisions in `tx` (not committed);
// `changed` gets the clusters whose containers changed (to reconcile after
// the commit). A decision that cannot be carried out now (a container of
// that index still leaving, no free address) is left for a later pass.
Status schedule(Database::Tx& tx, const AddressRange& addresses, int64_t now_ms, std::vector<std::string>* changed);

}  // namespace edt::control
