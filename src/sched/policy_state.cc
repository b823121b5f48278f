#include "sched/policy_state.h"

#include <algorithm>
#include <limits>

namespace edt::sched::detail {

int64_t limit_of(const Quota& quota) {
  if (quota.borrow_limit == kUnlimited) return std::numeric_limits<int64_t>::max() / 4;
  return int64_t{quota.guaranteed} + quota.borrow_limit;
}

bool ranks_before(const Cluster& a, const Cluster& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.arrival != b.arrival) return a.arrival < b.arrival;
  return a.name < b.name;
}

int service_level(const Cluster& c, int64_t quantum) {
  if (quantum <= 0) return 0;
  int level = 0;
  for (int64_t bound = quantum; c.service_gpu_s >= bound; bound *= 4) {
    ++level;
    if (bound > std::numeric_limits<int64_t>::max() / 4) break;
  }
  return level;
}

int64_t ModelState::cover_with(const std::string& team, int64_t more) const {
  int64_t cover = 0;
  for (const auto& [name, t] : teams) {
    int64_t floor = t.floor + (name == team ? more : 0);
    cover += std::max<int64_t>(t.quota.guaranteed, floor);
  }
  return cover;
}

namespace {

// The teams of the snapshot that have a quota for `model`.
void add_quotas(const Snapshot& snapshot, ModelState& model) {
  for (const Team& team : snapshot.teams) {
    auto quota = team.quotas.find(model.name);
    if (quota == team.quotas.end()) continue;
    TeamState& t = model.team(team.name);
    t.quota = quota->second;
    t.known = true;
  }
}

// The cluster's GPUs in its team's counts.
void count_cluster(const Cluster& c, ModelState& model) {
  TeamState& t = model.team(c.team);
  int64_t g = c.gpus_per_container;
  t.used += g * c.containers;
  t.held += g * (c.containers + c.draining);
  t.floor += g * std::min(c.containers, c.min_containers);
  model.capacity += g * c.containers;
}

// The model's orders: rank, queue, reclaim.
void order(const Snapshot& snapshot, ModelState& model) {
  auto before = [&](int a, int b) { return ranks_before(snapshot.clusters[a], snapshot.clusters[b]); };
  model.ranked = model.clusters;
  std::sort(model.ranked.begin(), model.ranked.end(), before);
  for (int i : model.ranked) {
    if (snapshot.clusters[i].queued()) model.queue.push_back(i);
    if (snapshot.clusters[i].elastic()) model.reclaim_order.push_back(i);
  }
  std::reverse(model.reclaim_order.begin(), model.reclaim_order.end());
  // Highest level first; stable: in a level, last rank first.
  std::stable_sort(model.reclaim_order.begin(), model.reclaim_order.end(),
                   [&](int a, int b) { return model.level(snapshot.clusters[a]) > model.level(snapshot.clusters[b]); });
}

}  // namespace

std::vector<ModelState> model_states(const Snapshot& snapshot) {
  std::map<std::string, ModelState> by_name;
  for (const auto& [name, pool] : snapshot.pools) {
    ModelState& model = by_name[name];
    model.free = pool.free;
    model.releasing = pool.releasing;
    model.capacity = int64_t{pool.free} + pool.releasing;
  }
  for (int i = 0; i < static_cast<int>(snapshot.clusters.size()); ++i) {
    const Cluster& c = snapshot.clusters[i];
    if (c.gpus_per_container == 0) continue;
    ModelState& model = by_name[c.gpu_model];
    model.clusters.push_back(i);
    count_cluster(c, model);
  }
  std::vector<ModelState> models;
  for (auto& [name, model] : by_name) {
    model.name = name;
    model.backfill_window = std::max<int64_t>(0, snapshot.backfill_window_ms);
    model.service_quantum = snapshot.service_quantum_gpu_s;
    add_quotas(snapshot, model);
    for (auto& [team_name, team] : model.teams) team.claimed = team.floor;
    order(snapshot, model);
    models.push_back(std::move(model));
  }
  return models;
}

std::vector<int> gpuless(const Snapshot& snapshot) {
  std::vector<int> indices;
  for (int i = 0; i < static_cast<int>(snapshot.clusters.size()); ++i)
    if (snapshot.clusters[i].gpus_per_container == 0) indices.push_back(i);
  return indices;
}

Work::Work(const Snapshot& snapshot)
    : reason(snapshot.clusters.size()),
      for_cluster(snapshot.clusters.size()),
      position(snapshot.clusters.size()),
      guaranteed(snapshot.clusters.size()),
      shrunk(snapshot.clusters.size()),
      snapshot_(snapshot) {
  for (const Cluster& c : snapshot.clusters) target.push_back(c.containers);
}

void Work::admit(ModelState& model, int i, int64_t need) {
  TeamState& team = model.team(cluster(i).team);
  target[i] = cluster(i).min_containers;
  team.used += need;
  team.held += need;
  team.floor += need;
  model.free -= need;
}

void Work::grow(ModelState& model, int i) {
  TeamState& team = model.team(cluster(i).team);
  int64_t g = cluster(i).gpus_per_container;
  target[i] += 1;
  team.used += g;
  team.held += g;
  model.free -= g;
}

void Work::shrink(ModelState& model, int i, int count, const std::string& for_name) {
  TeamState& team = model.team(cluster(i).team);
  int64_t gpus = this->gpus(i, target[i] - count);
  team.used -= gpus;  // held stays: the containers drain first
  team.floor -= this->gpus(i, std::max(0, std::min(target[i], cluster(i).min_containers) -
                                              std::min(count, cluster(i).min_containers)));
  target[i] = count;
  shrunk[i] = true;
  for_cluster[i] = for_name;
}

Decision Work::decision_of(int i) const {
  const Cluster& c = cluster(i);
  std::string count = std::to_string(target[i]);
  Decision d{Action::kWait, c.name, target[i], reason[i], "", position[i], guaranteed[i]};
  if (target[i] < c.containers) {
    d.action = Action::kShrink;
    d.for_cluster = for_cluster[i];
    if (for_cluster[i].empty()) {
      d.reason = "down to its max of " + count + " containers";
    } else if (d.reason.empty()) {
      d.reason = "reclaimed for cluster " + for_cluster[i] + ": containers borrowed beyond a guarantee go back to it";
    }
  } else if (c.queued() && target[i] >= c.min_containers) {
    d.action = Action::kAdmit;
    d.reason = c.gpus_per_container == 0 ? "needs no GPUs"
                                         : "admitted at its min of " + std::to_string(c.min_containers) +
                                               " containers";
    if (target[i] > c.min_containers && c.gpus_per_container > 0) d.reason += ", grown to " + count + " into idle GPUs";
  } else if (target[i] > c.containers) {
    d.action = Action::kGrow;
    d.reason = "grown to " + count + " containers into GPUs no guarantee needs now";
  }
  if (d.action != Action::kWait) d.position = 0, d.guaranteed = false;
  return d;
}

Decisions Work::decisions() const {
  Decisions out;
  for (Action action : {Action::kShrink, Action::kAdmit, Action::kGrow, Action::kWait}) {
    for (int i = 0; i < static_cast<int>(target.size()); ++i) {
      const Cluster& c = cluster(i);
      if (target[i] == c.containers && !c.queued()) continue;
      Decision d = decision_of(i);
      if (d.action == action) out.decisions.push_back(std::move(d));
    }
  }
  return out;
}

}  // namespace edt::sched::detail
