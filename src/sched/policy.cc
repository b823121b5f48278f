// decide(): the policy of policy.h, one GPU model at a time (models share
// nothing). Three passes over a working copy of the clusters' counts:
//
//   1. Down to max: a cluster holding more than its max (its user scaled it
//      down) drains the rest.
//   2. The queue: guaranteed requests first, then the others, each in rank
//      order. A request is admitted when free GPUs cover it and its team's
//      limit allows. A guaranteed request that does not fit reserves the
//      free and releasing GPUs it can use and reclaims the rest: borrowed
//      containers (a team keeps its guarantee), then its own team's elastic
//      growth. Any other request is admitted only where the "cover" stays
//      within the model's GPUs (the sum over teams of max(guarantee,
//      floor)): a floor is never taken back, so one beyond its team's
//      guarantee may only sit where no guarantee can ever claim. A request
//      that waits for free GPUs keeps elastic growth off them. In a team, a
//      request that waits for the team's own clusters (blocked) is passed
//      only by requests that arrived within the backfill window after it.
//   3. Growth: elastic clusters take the GPUs left, one container at a time,
//      the team borrowing least first (the least over its guarantee), and in
//      a team the cluster of the lowest service level, then least over its
//      min. Not a team with a guaranteed request waiting, nor a cluster
//      shrunk in this pass. (Reclaim in pass 2 drains the highest level first.)
//   4. Rebalance: in a team, a cluster below its max takes containers drained
//      from the team's clusters of a higher service level above their min,
//      where those GPUs will reach it (no request waits, one team grows).
#include "sched/policy.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "sched/policy_state.h"

namespace edt::sched {

const char* action_name(Action action) {
  switch (action) {
    case Action::kAdmit: return "admit";
    case Action::kGrow: return "grow";
    case Action::kShrink: return "shrink";
    case Action::kWait: return "wait";
  }
  return "unknown";
}

const Decision* Decisions::find(const std::string& cluster) const {
  for (const Decision& d : decisions)
    if (d.cluster == cluster) return &d;
  return nullptr;
}

namespace {

using detail::ModelState;
using detail::TeamState;
using detail::Work;

// Pass 1: clusters above their max drain down to it.
void down_to_max(Work& work, ModelState& model) {
  for (int i : model.clusters) {
    const Cluster& c = work.cluster(i);
    if (work.target[i] <= c.max_containers) continue;
    model.releasing += work.gpus(i, work.target[i] - c.max_containers);
    work.shrink(model, i, c.max_containers, "");
  }
}

// A reclaim being planned: containers taken per cluster and GPUs per team,
// carried out only once it covers what the request misses.
struct Plan {
  std::map<int, int> taken;               // cluster index -> containers
  std::map<std::string, int64_t> lost;    // team -> GPUs
  int64_t gpus = 0;
};

// Adds to `plan` containers of `candidates` (in order), each down to its
// min, while `allowed(team, GPUs it would have left)` and `want` GPUs are
// missing. Returns the GPUs added.
template <typename Allowed>
int64_t take(const Work& work, ModelState& model, const std::vector<int>& candidates, Plan& plan, int64_t want,
             Allowed allowed) {
  int64_t added = 0;
  for (int i : candidates) {
    const Cluster& c = work.cluster(i);
    const TeamState& team = model.team(c.team);
    int g = c.gpus_per_container;
    int& taken = plan.taken[i];
    int64_t& lost = plan.lost[c.team];
    while (added < want && work.target[i] - taken > c.min_containers && allowed(team, team.used - lost - g)) {
      ++taken;
      lost += g;
      added += g;
    }
  }
  plan.gpus += added;
  return added;
}

// The reclaim for a guaranteed request missing `want` GPUs, of which at
// least `own_min` must come from its own team (to keep it within its
// limit): borrowed containers of other teams (down to their guarantee),
// then its own team's elastic growth. Carried out only when it covers both.
bool reclaim(Work& work, ModelState& model, int index, int64_t want, int64_t own_min) {
  const std::string& team_name = work.cluster(index).team;
  std::vector<int> own, others;
  for (int i : model.reclaim_order)
    (work.cluster(i).team == team_name ? own : others).push_back(i);
  auto any = [](const TeamState&, int64_t) { return true; };
  auto keeps_guarantee = [](const TeamState& t, int64_t left) { return left >= t.quota.guaranteed; };
  Plan plan;
  if (take(work, model, own, plan, own_min, any) < own_min) return false;
  take(work, model, others, plan, want - plan.gpus, keeps_guarantee);
  take(work, model, own, plan, want - plan.gpus, any);
  if (plan.gpus < want) return false;
  for (auto [i, taken] : plan.taken)
    if (taken > 0) work.shrink(model, i, work.target[i] - taken, work.cluster(index).name);
  model.releasing += plan.gpus - want;  // a container's worth beyond the need: anyone's
  return true;
}

std::string gpus_text(int64_t n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

// A guaranteed request that free GPUs do not cover (or whose team is at its
// limit): reserve what is free and releasing, reclaim the rest. Returns
// whether that covers it (else it waits for its team's clusters to end).
bool wait_guaranteed(Work& work, ModelState& model, int index, int64_t need) {
  TeamState& team = model.team(work.cluster(index).team);
  int64_t from_free = std::min(model.free, need);
  int64_t from_releasing = std::min(model.releasing, need - from_free);
  int64_t missing = need - from_free - from_releasing;
  int64_t own_min = std::max<int64_t>(0, team.held + need - team.limit());
  model.free -= from_free;
  model.releasing -= from_releasing;
  team.waiting_guaranteed = true;
  team.pending += need;
  work.guaranteed[index] = true;
  if (missing == 0 && own_min == 0) {
    work.reason[index] = "waiting for " + gpus_text(from_releasing) + " to finish draining (guaranteed)";
  } else if (reclaim(work, model, index, missing, own_min)) {
    work.reason[index] = "waiting for " + gpus_text(std::max(missing, own_min)) +
                         " reclaimed from elastic clusters to drain (guaranteed)";
  } else {
    work.reason[index] = "within its team's guarantee, but only " + gpus_text(from_free + from_releasing) +
                         " of " + gpus_text(need) +
                         " can be had: waiting for more to free up (guarantees exceed the GPUs, or containers "
                         "do not divide them)";
    return false;
  }
  return true;
}

// Why a borrowing request does not fit beside the teams' guarantees. Where
// its floor fits only if other teams' guarantees shrank, it says so: such a
// request starts only when an admin changes a quota or a team.
std::string kept_for_guarantees(const ModelState& model, const Cluster& c, int64_t need) {
  int64_t others = 0;
  for (const auto& [name, t] : model.teams)
    if (name != c.team) others += t.quota.guaranteed;
  std::string who = c.team.empty() ? "its user is in no team, so it has no guarantee"
                                   : "beyond team " + c.team + "'s guarantee";
  if (others + need > model.capacity)
    return who + ", and other teams' guarantees hold " + gpus_text(others) + " of the " + gpus_text(model.capacity) +
           " " + model.name + ": it starts only once an admin gives " +
           (c.team.empty() ? "its user a team with a guarantee" : "its team a larger guarantee") +
           " or lowers other teams' guarantees (edt team quota)";
  return who + ", and the " + model.name + " GPUs left are kept for other teams' guarantees";
}

// Why a request that is not guaranteed cannot start now; "" if it can.
// A guaranteed request fits the cover by definition (its floor stays within
// its guarantee), even where guarantees exceed the GPUs.
std::string refusal(const ModelState& model, const Cluster& c, int64_t need, bool guaranteed) {
  const std::string& name = c.team;
  const TeamState& team = model.teams.at(name);
  if (!team.known) return "its team has no quota for " + model.name + " GPUs";
  // A borrowing floor of its team would push that request out of the guarantee.
  if (!guaranteed && team.behind(c, model.backfill_window))
    return "behind cluster " + team.first_waiting + ", first of its team to wait within the team's guarantee";
  // Its floor would take GPUs of the guarantee that its team's guaranteed
  // requests (first in the queue) wait for, and push them out of it.
  if (!guaranteed && team.pending > 0 && team.floor + team.pending + need > team.quota.guaranteed)
    return "its team's guaranteed requests wait for " + gpus_text(team.pending) + " of the team's guarantee";
  if (team.held + need > team.limit())
    return "its team holds " + gpus_text(team.held) + " of its limit of " + gpus_text(team.limit()) +
           "; it needs " + gpus_text(need) + " more";
  if (!guaranteed && model.cover_with(name, need) > model.capacity) return kept_for_guarantees(model, c, need);
  if (need > model.free) return "waiting for " + gpus_text(need) + "; " + gpus_text(model.free) + " free";
  return "";
}

// Pass 2a: the guaranteed requests, in rank order, first: GPUs they need
// are theirs before any request that borrows, and requests ranked after one
// use only what its reservation leaves. The first request of a team that
// fits the team's guarantee but not what its floors leave of it (or that
// reclaim cannot cover) is blocked: it waits for the team's clusters to end,
// and of the team's later requests only those that arrived within the
// backfill window after it may pass it (else smaller ones would pass it for
// ever). Returns the requests that are not guaranteed, in rank order.
std::vector<int> admit_guaranteed(Work& work, ModelState& model, int& position) {
  std::vector<int> others;
  for (int i : model.queue) {
    const Cluster& c = work.cluster(i);
    TeamState& team = model.team(c.team);
    int64_t need = work.gpus(i, c.min_containers - c.containers);
    bool behind = team.behind(c, model.backfill_window);
    if (!team.known || need > team.quota.guaranteed || behind || team.claimed + need > team.quota.guaranteed) {
      if (team.known && need <= team.quota.guaranteed && team.first_waiting.empty()) {
        team.block(c);
        work.reason[i] = "waiting for its team's clusters to free " +
                         gpus_text(team.claimed + need - team.quota.guaranteed) + " of its guarantee";
      }
      others.push_back(i);
      continue;
    }
    team.claimed += need;
    work.position[i] = ++position;
    if (refusal(model, c, need, true).empty()) {
      work.admit(model, i, need);
    } else if (!wait_guaranteed(work, model, i, need) && team.first_waiting.empty()) {
      team.block(c);  // reclaim cannot cover it (one it covers blocks no one: the others get what it leaves)
    }
  }
  return others;
}

// Pass 2b: the requests that borrow, in rank order, into what is left. One
// that waits for free GPUs keeps growth off them.
void admit_borrowing(Work& work, ModelState& model, const std::vector<int>& requests, int& position) {
  for (int i : requests) {
    const Cluster& c = work.cluster(i);
    TeamState& team = model.team(c.team);
    int64_t need = work.gpus(i, c.min_containers - c.containers);
    work.position[i] = ++position;
    std::string why = refusal(model, c, need, false);
    if (why.empty()) {
      work.admit(model, i, need);
      if (team.first_waiting == c.name) team.first_waiting.clear();  // it borrowed: no longer first
      continue;
    }
    if (team.first_waiting != c.name) work.reason[i] = why;
    if (team.known && team.first_waiting.empty() && team.held + need <= team.limit() &&
        model.cover_with(c.team, need) <= model.capacity)
      model.growth_reserve += need;
  }
}

// Pass 3: elastic growth into the GPUs nobody waits for, fairly by team.
void grow(Work& work, ModelState& model) {
  int64_t budget = std::max<int64_t>(0, model.free - model.growth_reserve);
  // Per team, its growable clusters: (service level, GPUs over its min, rank, index).
  std::map<std::string, std::set<std::tuple<int, int64_t, int, int>>> growable;
  for (int r = 0; r < static_cast<int>(model.ranked.size()); ++r) {
    int i = model.ranked[r];
    const Cluster& c = work.cluster(i);
    TeamState& team = model.team(c.team);
    if (!c.elastic() || work.target[i] < c.min_containers || work.target[i] >= c.max_containers) continue;
    if (work.shrunk[i] || team.waiting_guaranteed) continue;
    growable[c.team].emplace(model.level(c), work.gpus(i, work.target[i] - c.min_containers), r, i);
  }
  std::set<std::pair<int64_t, std::string>> teams;  // (borrowed, name): least first
  for (const auto& [name, clusters] : growable) teams.emplace(model.team(name).borrowed(), name);
  while (!teams.empty() && budget > 0) {
    auto [borrowed, name] = *teams.begin();
    teams.erase(teams.begin());
    TeamState& team = model.team(name);
    auto& clusters = growable[name];
    auto [level, over, rank, i] = *clusters.begin();
    clusters.erase(clusters.begin());
    int g = work.cluster(i).gpus_per_container;
    if (g <= budget && team.held + g <= team.limit()) {
      work.grow(model, i);
      budget -= g;
      if (work.target[i] < work.cluster(i).max_containers) clusters.emplace(level, over + g, rank, i);
    }
    if (!clusters.empty()) teams.emplace(team.borrowed(), name);
  }
}

// The team whose elastic clusters alone could still grow, or "" if none or
// several: the GPUs a rebalance drains go to growth, and growth serves the
// team that borrows least first, so they reach the team that drained them
// only where no other team could take them.
std::string only_growable_team(const Work& work, const ModelState& model) {
  std::string only;
  for (int i : model.clusters) {
    const Cluster& c = work.cluster(i);
    if (!c.elastic() || work.target[i] < c.min_containers || work.target[i] >= c.max_containers) continue;
    if (!only.empty() && only != c.team) return "";
    only = c.team;
  }
  return only;
}

// The containers to drain for `r` (donor -> count to keep): of `donors`
// (highest level first) those of a higher level than r's, down to their
// min, never more GPUs than r can take up to its max. Not a cluster that
// pass 3 grew.
std::map<int, int> drains_for(const Work& work, const ModelState& model, int r, const std::vector<int>& donors) {
  const Cluster& receiver = work.cluster(r);
  int64_t want = work.gpus(r, receiver.max_containers - work.target[r]);
  std::map<int, int> plan;
  for (int d : donors) {
    const Cluster& donor = work.cluster(d);
    if (model.level(donor) <= model.level(receiver)) break;
    if (work.target[d] > donor.containers) continue;
    int keep = work.target[d];
    for (; keep > donor.min_containers && donor.gpus_per_container <= want; --keep) want -= donor.gpus_per_container;
    if (keep < work.target[d]) plan[d] = keep;
  }
  return plan;
}

// Pass 4: least attained service first, on elastic growth only (floors are
// never touched, so every admitted cluster keeps running at its min: no one
// starves). In a team, an elastic cluster below its max takes containers
// drained from the team's elastic clusters of a higher service level, down
// to their min; once they have drained, growth (lowest level first) gives
// it their GPUs. Only while no request waits for GPUs of the model and
// nothing drains (the GPUs then reach growth), and one team alone could grow.
void rebalance(Work& work, ModelState& model) {
  if (model.service_quantum <= 0 || model.releasing > 0 || model.growth_reserve > 0) return;
  for (const auto& [name, team] : model.teams)
    if (team.waiting_guaranteed) return;
  const std::string team = only_growable_team(work, model);
  if (team.empty()) return;
  std::vector<int> members;  // the team's admitted elastic clusters, by (level, service, rank)
  for (int i : model.ranked) {
    const Cluster& c = work.cluster(i);
    if (c.team == team && c.elastic() && work.target[i] >= c.min_containers && !work.shrunk[i]) members.push_back(i);
  }
  auto key = [&](int i) { return std::make_pair(model.level(work.cluster(i)), work.cluster(i).service_gpu_s); };
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return key(a) < key(b); });
  std::vector<int> donors(members.rbegin(), members.rend());
  int64_t spare = model.free;  // free GPUs growth could not place
  for (int r : members) {
    const Cluster& receiver = work.cluster(r);
    if (work.shrunk[r] || work.target[r] >= receiver.max_containers) continue;
    std::map<int, int> plan = drains_for(work, model, r, donors);
    int64_t taken = 0;
    for (auto [d, keep] : plan) taken += work.gpus(d, work.target[d] - keep);
    // Only what gives it a whole container: GPUs it cannot use would go back
    // to growth, and from there to the clusters they were drained from.
    if (taken == 0 || taken + spare < receiver.gpus_per_container) continue;
    spare = (taken + spare) % receiver.gpus_per_container;
    for (auto [d, keep] : plan) {
      work.reason[d] = "drained for cluster " + receiver.name +
                       ", which has had less service: elastic growth goes to the clusters that ran least";
      work.shrink(model, d, keep, receiver.name);
    }
  }
}

// Clusters that need no GPUs: admitted at once, at their max.
void place_gpuless(Work& work, const std::vector<int>& indices) {
  for (int i : indices) {
    const Cluster& c = work.cluster(i);
    if (work.target[i] == c.max_containers) continue;
    work.target[i] = c.max_containers;
    work.reason[i] = "needs no GPUs";
  }
}

}  // namespace

Result<Decisions> decide(const Snapshot& snapshot) {
  EDT_RETURN_IF_ERROR(validate(snapshot));
  Work work(snapshot);
  std::vector<ModelState> models = detail::model_states(snapshot);
  place_gpuless(work, detail::gpuless(snapshot));
  for (ModelState& model : models) {
    down_to_max(work, model);
    int position = 0;
    admit_borrowing(work, model, admit_guaranteed(work, model, position), position);
    grow(work, model);
    rebalance(work, model);
  }
  return work.decisions();
}

}  // namespace edt::sched
