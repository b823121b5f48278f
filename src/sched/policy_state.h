// The working state of one decide() call (policy.cc), apart from the
// passes that change it: per GPU model the pools and each team's counts,
// and per cluster the count it is headed for. Internal to edt_sched.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sched/policy.h"

namespace edt::sched::detail {

// int64_t arithmetic with kUnlimited kept out of overflow.
int64_t limit_of(const Quota& quota);

// Whether a ranks before b in a queue: priority (higher first), arrival
// (earlier first), name.
bool ranks_before(const Cluster& a, const Cluster& b);

// The cluster's service level (Snapshot::service_quantum_gpu_s): 0 below
// the quantum, then one more per factor of 4; 0 for all if quantum <= 0.
int service_level(const Cluster& c, int64_t quantum);

// A team's counts on one GPU model, in GPUs.
struct TeamState {
  Quota quota;
  bool known = false;    // the team has a quota for this model
  int64_t used = 0;      // held by its clusters, at the counts they are headed for
  int64_t held = 0;      // used, plus containers still draining: what its limit bounds
  int64_t floor = 0;     // of used, its clusters' floors
  int64_t claimed = 0;   // floor plus its guaranteed requests ranked so far
  bool waiting_guaranteed = false;  // a guaranteed request of it waits (for GPUs)
  int64_t pending = 0;   // GPUs its waiting guaranteed requests need
  // Its first request in rank order that fits its guarantee but waits for
  // the team's own clusters to end (blocked), and when it arrived: its later
  // requests that arrived more than the backfill window after it queue
  // behind it. "" if none.
  std::string first_waiting;
  int64_t first_waiting_arrival = 0;

  void block(const Cluster& c) {
    first_waiting = c.name;
    first_waiting_arrival = c.arrival;
  }
  // Whether `c` waits behind the team's blocked request.
  bool behind(const Cluster& c, int64_t window) const {
    return !first_waiting.empty() && first_waiting != c.name && c.arrival - first_waiting_arrival > window;
  }

  int64_t limit() const { return limit_of(quota); }
  int64_t borrowed() const { return used - quota.guaranteed; }
};

struct ModelState {
  std::string name;
  int64_t backfill_window = 0;  // Snapshot::backfill_window_ms
  int64_t service_quantum = 0;  // Snapshot::service_quantum_gpu_s
  int64_t capacity = 0;        // free + releasing + used by all
  int64_t free = 0;            // free and not reserved
  int64_t releasing = 0;       // releasing and not claimed by a request
  int64_t growth_reserve = 0;  // free GPUs kept from growth for waiting requests
  std::map<std::string, TeamState> teams;
  std::vector<int> clusters;       // the snapshot's clusters of this model
  std::vector<int> ranked;         // of them, in rank order
  std::vector<int> queue;          // of them, the queued ones in rank order
  // Of them, the elastic ones: highest service level first, then last rank.
  std::vector<int> reclaim_order;

  TeamState& team(const std::string& name) { return teams[name]; }
  int level(const Cluster& c) const { return service_level(c, service_quantum); }
  // The sum over teams of max(guarantee, floor), with the floor of the team
  // named `team` raised by `more`. Within `capacity`, every team can get
  // its guarantee back by reclaiming borrowed containers.
  int64_t cover_with(const std::string& team, int64_t more) const;
  int64_t cover() const { return cover_with("", 0); }
};

// Per cluster (by index in the snapshot), what decide() has made of it.
class Work {
 public:
  explicit Work(const Snapshot& snapshot);

  const Cluster& cluster(int i) const { return snapshot_.clusters[i]; }
  int64_t gpus(int i, int64_t containers) const { return containers * cluster(i).gpus_per_container; }

  void admit(ModelState& model, int i, int64_t need);
  void grow(ModelState& model, int i);
  // Down to `count`, draining the rest; `for_cluster`: the request it is for.
  void shrink(ModelState& model, int i, int count, const std::string& for_cluster);
  Decisions decisions() const;

  std::vector<int> target;
  std::vector<std::string> reason;  // a waiting cluster's
  std::vector<std::string> for_cluster;
  std::vector<int> position;
  std::vector<bool> guaranteed;
  std::vector<bool> shrunk;

 private:
  Decision decision_of(int i) const;

  const Snapshot& snapshot_;
};

// One ModelState per GPU model the snapshot's clusters or pools name.
std::vector<ModelState> model_states(const Snapshot& snapshot);

// The clusters that need no GPUs.
std::vector<int> gpuless(const Snapshot& snapshot);

}  // namespace edt::sched::detail
