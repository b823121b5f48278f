// validate(), usage(), apply() and check_decisions(): what is around
// decide() to feed it, read it and hold it to policy.h's guarantees.
#include <algorithm>
#include <set>

#include "sched/policy.h"
#include "sched/policy_state.h"

namespace edt::sched {

namespace {

Status bad(const std::string& where, const std::string& field, const std::string& what, const std::string& fix) {
  return Status(StatusCode::kInvalidArgument, field, where + ": " + what, fix);
}

Status validate_cluster(const Cluster& c, size_t i) {
  std::string where = "cluster " + (c.name.empty() ? "#" + std::to_string(i) : "'" + c.name + "'");
  std::string field = "clusters[" + std::to_string(i) + "]";
  if (c.name.empty()) return bad(where, field + ".name", "has no name", "give every cluster a unique name");
  if (c.min_containers < 1)
    return bad(where, field + ".min_containers", "min_containers " + std::to_string(c.min_containers) + " < 1",
               "a cluster has at least one container");
  if (c.max_containers < c.min_containers)
    return bad(where, field + ".max_containers", "max_containers below min_containers", "set max >= min");
  if (c.containers < 0 || c.draining < 0)
    return bad(where, field + ".containers", "negative container count", "count what it holds, 0 if nothing");
  if (c.gpus_per_container < 0 || (c.gpus_per_container > 0 && c.gpu_model.empty()))
    return bad(where, field + ".gpus_per_container", "GPUs per container negative, or GPUs of no model",
               "give a count >= 0 and, with GPUs, their model");
  return Status::ok();
}

Status validate_teams(const Snapshot& snapshot) {
  std::set<std::string> names;
  for (size_t i = 0; i < snapshot.teams.size(); ++i) {
    const Team& team = snapshot.teams[i];
    std::string field = "teams[" + std::to_string(i) + "]";
    if (!names.insert(team.name).second)
      return bad("team '" + team.name + "'", field + ".name", "named twice", "merge its quotas into one team");
    for (const auto& [model, quota] : team.quotas)
      if (quota.guaranteed < 0 || quota.borrow_limit < 0)
        return bad("team '" + team.name + "'", field + ".quotas." + model, "negative quota",
                   "give GPU counts >= 0 (kUnlimited: no borrowing bound)");
  }
  return Status::ok();
}

}  // namespace

Status validate(const Snapshot& snapshot) {
  EDT_RETURN_IF_ERROR(validate_teams(snapshot));
  std::set<std::string> names;
  for (size_t i = 0; i < snapshot.clusters.size(); ++i) {
    EDT_RETURN_IF_ERROR(validate_cluster(snapshot.clusters[i], i));
    if (!names.insert(snapshot.clusters[i].name).second)
      return bad("cluster '" + snapshot.clusters[i].name + "'", "clusters[" + std::to_string(i) + "].name",
                 "named twice", "give every cluster a unique name");
  }
  for (const auto& [model, pool] : snapshot.pools)
    if (pool.free < 0 || pool.releasing < 0)
      return bad("pool '" + model + "'", "pools." + model, "negative GPU count", "count free GPUs, 0 if none");
  return Status::ok();
}

std::vector<TeamUsage> usage(const Snapshot& snapshot) {
  std::vector<TeamUsage> rows;
  for (detail::ModelState& model : detail::model_states(snapshot)) {
    for (const auto& [name, team] : model.teams) {
      int64_t queued = 0;
      for (int i : model.queue) {
        const Cluster& c = snapshot.clusters[i];
        if (c.team == name) queued += int64_t{c.gpus_per_container} * (c.min_containers - c.containers);
      }
      int limit = static_cast<int>(std::min<int64_t>(team.limit(), kUnlimited));
      rows.push_back({name, model.name, static_cast<int>(team.used), static_cast<int>(team.floor),
                      team.quota.guaranteed, limit, static_cast<int>(std::max<int64_t>(0, team.borrowed())),
                      static_cast<int>(queued)});
    }
  }
  std::sort(rows.begin(), rows.end(), [](const TeamUsage& a, const TeamUsage& b) {
    return std::tie(a.team, a.gpu_model) < std::tie(b.team, b.gpu_model);
  });
  return rows;
}

Snapshot apply(const Snapshot& snapshot, const Decisions& decisions) {
  Snapshot next = snapshot;
  for (const Decision& d : decisions.decisions) {
    auto it = std::find_if(next.clusters.begin(), next.clusters.end(),
                           [&](const Cluster& c) { return c.name == d.cluster; });
    if (it == next.clusters.end() || d.action == Action::kWait) continue;
    int gpus = it->gpus_per_container * (d.containers - it->containers);
    if (d.action == Action::kShrink) it->draining += it->containers - d.containers;
    it->containers = d.containers;
    if (gpus == 0) continue;
    Pool& pool = next.pools[it->gpu_model];
    (gpus < 0 ? pool.releasing : pool.free) -= gpus;  // a shrink releases -gpus
  }
  return next;
}

void finish_drains(Snapshot& snapshot) {
  for (auto& [model, pool] : snapshot.pools) {
    pool.free += pool.releasing;
    pool.releasing = 0;
  }
  for (Cluster& c : snapshot.clusters) c.draining = 0;
}

}  // namespace edt::sched
