// The GPU scheduling policy: a pure function from a snapshot of teams,
// clusters and free GPUs to the decisions that share the GPUs between them.
// edtd's reconciler drives it with its live state; bench/sched drives it
// with a trace. It keeps no state, reads no clock and does no I/O: the same
// snapshot always gives the same decisions, safe from any thread.
// docs/scheduling.md is its reference; the terms:
//
//   guarantee  GPUs of one model a team may always get back (Quota::guaranteed).
//   limit      the most GPUs of a model a team may hold: guarantee + borrow limit.
//   floor      a cluster's first `min_containers` containers: never taken away
//              by the policy once admitted. A team's floor is its clusters'.
//   borrowed   GPUs a team holds beyond its guarantee.
//   request    a cluster holding fewer containers than its min (a new cluster,
//              or a running one its user scaled up): it waits in the queue of
//              its GPU model.
//   rank       priority (higher first), then arrival (earlier first), then name.
//   service    GPU-seconds a cluster has held (Cluster::service_gpu_s); its
//              level: 0 below Snapshot::service_quantum_gpu_s, one more per
//              factor of 4 (Tiresias' discretised 2D least-attained-service).
//   guaranteed request   one that fits its team's guarantee on top of the
//              team's floors and the team's guaranteed requests ranked before
//              it. Guaranteed requests come first in the queue, the others
//              (borrowing) after, each by rank. Only a guaranteed request
//              reclaims: the policy drains borrowed containers (and its own
//              team's elastic growth) for it.
//
// Guarantees (each checked by check_decisions(), property-tested):
//   - No team goes over its limit; no cluster goes below its min; a
//     non-elastic cluster (max == min) is never shrunk; no container is taken
//     from a team that would leave it below its guarantee, except by a request
//     of its own team.
//   - A floor is admitted beyond its team's guarantee only into GPUs that no
//     team's guarantee can claim (sum over teams of max(guarantee, floor) stays
//     within the model's GPUs), because a floor is never taken back.
//   - A guaranteed request is admitted once the containers reclaimed for it
//     have drained: free GPUs it waits for are reserved for it, so requests
//     ranked after it (backfill) and elastic growth cannot take them. Only a
//     request of its own team ranked before it (of higher priority, or one it
//     passed within the backfill window) can move it back.
//   - Service levels order only containers above a min: growth serves the
//     lowest level first, reclaim drains the highest first, and in a team a
//     cluster below its max takes containers drained from the team's
//     clusters of a higher level (never below their min, never another
//     team's, only while no request waits for GPUs and no other team could
//     grow). Every admitted cluster keeps its floor: none starves.
//   - A guaranteed request that its reservation and reclaim cover blocks no
//     one: the requests after it get only what it leaves. A request that
//     waits for its team's own clusters to end (blocked) is passed only by
//     requests of its team that arrived at most Snapshot::backfill_window_ms
//     after it: finitely many, so it starts once they and the clusters before
//     it end. A guaranteed request that passed it yields to it once it fits.
// GPUs are counted per model, not per host: the caller places containers.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "edt/status.h"

namespace edt::sched {

// No bound on borrowing.
inline constexpr int kUnlimited = std::numeric_limits<int>::max();

// A team's share of the GPUs of one model.
struct Quota {
  int guaranteed = 0;    // GPUs the team can always get back
  int borrow_limit = 0;  // GPUs it may hold beyond that (kUnlimited: any)
};

struct Team {
  std::string name;
  std::map<std::string, Quota> quotas;  // by GPU model; a model not here: {0, 0}
};

struct Cluster {
  std::string name;  // unique in the snapshot
  std::string team;  // a team not in the snapshot has no quota: its clusters wait
  int priority = 0;  // higher first
  // When its current request was made (created, or scaled up), in
  // milliseconds of any clock, the same for all clusters. Earlier first among
  // equal priority; Snapshot::backfill_window_ms counts in it.
  int64_t arrival = 0;
  std::string gpu_model;       // "" with gpus_per_container 0: needs no GPUs
  int gpus_per_container = 0;
  int min_containers = 1;      // >= 1; the floor
  int max_containers = 1;      // >= min; max > min: elastic
  // What it holds now, or is shrinking to. 0 for a new cluster.
  int containers = 0;
  // Containers leaving it that still hold their GPUs (draining): they count
  // against its team's limit until they are gone, and in Pool::releasing.
  int draining = 0;
  // GPU-seconds it has held since it was admitted (its attained service);
  // 0 where the caller does not count it. Orders elastic growth and reclaim
  // by service level (Snapshot::service_quantum_gpu_s), never floors.
  int64_t service_gpu_s = 0;

  bool elastic() const { return max_containers > min_containers; }
  bool queued() const { return containers < min_containers; }
};

// The GPUs of one model that the snapshot's clusters do not hold.
struct Pool {
  int free = 0;       // idle now
  // Held by containers draining (of the snapshot's clusters, or of clusters
  // deleted since); free once they leave.
  int releasing = 0;
};

// How long after a blocked request of its team (one that waits for the
// team's own clusters to end) a later request may still pass it: a day.
// Longer windows lower the mean wait under overload and lengthen the
// longest (bench/sched/RESULTS.md measures both).
inline constexpr int64_t kDefaultBackfillWindowMs = 24 * 3'600'000LL;

// The first service level's bound: an hour on one GPU. Each next level's
// is 4 times the one before (Tiresias' 2D-LAS discretised).
inline constexpr int64_t kDefaultServiceQuantumGpuS = 3600;

struct Snapshot {
  std::vector<Team> teams;
  std::vector<Cluster> clusters;
  std::map<std::string, Pool> pools;  // by GPU model; a model not here has none
  // A request ranked after a blocked request of its team may start before it
  // only if it arrived at most this long after it (0: strict rank order in a
  // team). So only the finitely many requests of that window pass it.
  int64_t backfill_window_ms = kDefaultBackfillWindowMs;
  // Service levels: a cluster with less than this many GPU-seconds of
  // service is at level 0, below 4 times it at level 1, and so on. Elastic
  // growth goes to the lowest level first, reclaim takes from the highest,
  // and a cluster that could grow takes containers of its team's clusters
  // of a higher level above their min (least attained service first: jobs
  // that ran least are the likeliest to end soon). 0: one level for all.
  int64_t service_quantum_gpu_s = kDefaultServiceQuantumGpuS;
};

enum class Action {
  kAdmit,   // a queued cluster reaches its min (start it, or scale it up to it)
  kGrow,    // an elastic cluster grows into idle GPUs
  kShrink,  // drain containers at their job's next commit (reclaim, or down to max)
  kWait,    // a queued cluster stays queued
};

const char* action_name(Action action);

struct Decision {
  Action action = Action::kWait;
  std::string cluster;
  int containers = 0;  // the count to go to (kWait: what it holds now)
  std::string reason;  // for a person: "reclaimed for cluster b (team ml's guarantee)"
  // kShrink for a request: the cluster it makes room for; "" otherwise.
  std::string for_cluster;
  // kWait only: its place in its GPU model's queue (1 first), and whether it
  // is a guaranteed request (containers are being reclaimed for it).
  int position = 0;
  bool guaranteed = false;
};

// In the order to carry out: shrinks, then admits, then grows, then waits.
// A cluster whose size stays as it is and that is not queued gets none.
struct Decisions {
  std::vector<Decision> decisions;

  const Decision* find(const std::string& cluster) const;
};

// Whether the snapshot is one decide() accepts: unique names, counts in
// range (min >= 1, max >= min, containers >= 0, GPUs >= 0), quotas >= 0.
// The error names the cluster, team or model and the field.
Status validate(const Snapshot& snapshot);

// The decisions for this snapshot, or validate()'s error.
Result<Decisions> decide(const Snapshot& snapshot);

// A team's standing on one GPU model, as the policy counts it.
struct TeamUsage {
  std::string team;
  std::string gpu_model;
  int used = 0;        // GPUs its clusters hold
  int floor = 0;       // of which floors
  int guaranteed = 0;
  int limit = 0;       // guaranteed + borrow limit (kUnlimited: none)
  int borrowed = 0;    // max(0, used - guaranteed)
  int queued = 0;      // GPUs its queued clusters wait for
};

// One row per (team, model) that has a quota or a cluster, sorted.
std::vector<TeamUsage> usage(const Snapshot& snapshot);

// The snapshot after the decisions are carried out: admitted and grown
// clusters hold their new counts (taken from their pool's free GPUs), the
// GPUs of shrunk ones are releasing. For simulators and tests.
Snapshot apply(const Snapshot& snapshot, const Decisions& decisions);

// Every drain finished: each pool's releasing GPUs become free.
void finish_drains(Snapshot& snapshot);

// Whether the decisions keep the policy's guarantees (above) for this
// snapshot: the first one broken, naming the cluster or team. For tests,
// the simulator, and a reconciler that wants to assert.
Status check_decisions(const Snapshot& snapshot, const Decisions& decisions);

}  // namespace edt::sched
