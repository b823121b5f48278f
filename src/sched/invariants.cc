// check_decisions(): policy.h's guarantees, checked on one step, from
// the snapshot before and after the decisions (apply()).
#include <algorithm>
#include <map>
#include <set>

#include "sched/policy.h"
#include "sched/policy_state.h"

namespace edt::sched {

namespace {

Status broken(const std::string& what) { return Status(StatusCode::kInternal, "scheduling invariant broken: " + what); }

// The rules a decision keeps for its own cluster.
Status check_one(const Cluster& c, const Decision& d) {
  std::string who = "cluster " + c.name + " (" + action_name(d.action) + " to " + std::to_string(d.containers) + ")";
  switch (d.action) {
    case Action::kAdmit:
      if (!c.queued() || d.containers < c.min_containers || d.containers > c.max_containers)
        return broken(who + ": admitted while not queued, or outside min..max");
      break;
    case Action::kGrow:
      if (c.queued() || !c.elastic() || d.containers <= c.containers || d.containers > c.max_containers)
        return broken(who + ": grown while queued or not elastic, or past its max");
      break;
    case Action::kShrink:
      if (d.containers >= c.containers) return broken(who + ": a shrink that does not shrink");
      if (d.for_cluster.empty() ? d.containers != c.max_containers
                                : (!c.elastic() || d.containers < c.min_containers))
        return broken(who + ": below its min, a non-elastic cluster shrunk, or not down to its max");
      break;
    case Action::kWait:
      if (!c.queued() || d.containers != c.containers || d.position < 1)
        return broken(who + ": waits while not queued, or without a place in the queue");
      break;
  }
  return Status::ok();
}

// "team/model" -> GPUs.
using TeamGpus = std::map<std::string, int64_t>;

// Each decision names a cluster of the snapshot once; each queued cluster
// has one. Fills `reclaimed_by_others` with the "team/model" of the teams
// that lost containers to another team's request, with the GPUs of them
// that may have drained for its own guaranteed requests (at most what those
// wait for): one cluster may drain for a request of another team and one of
// its own in one step (it names the last), and the latter's GPUs stay the
// team's.
Status check_each(const Snapshot& s, const Decisions& decisions, TeamGpus& reclaimed_by_others) {
  std::map<std::string, const Cluster*> by_name;
  for (const Cluster& c : s.clusters) by_name[c.name] = &c;
  std::set<std::string> seen;
  TeamGpus own, released;
  for (const Decision& d : decisions.decisions) {
    auto it = by_name.find(d.cluster);
    if (it == by_name.end() || !seen.insert(d.cluster).second)
      return broken("decision for cluster " + d.cluster + ": unknown, or decided twice");
    const Cluster& c = *it->second;
    EDT_RETURN_IF_ERROR(check_one(c, d));
    if (d.action == Action::kWait && d.guaranteed)
      own[c.team + "/" + c.gpu_model] += int64_t{c.gpus_per_container} * (c.min_containers - c.containers);
    if (d.action != Action::kShrink) continue;
    released[c.team + "/" + c.gpu_model] += int64_t{c.gpus_per_container} * (c.containers - d.containers);
    auto requester = by_name.find(d.for_cluster);
    if (requester != by_name.end() && requester->second->team != c.team)
      reclaimed_by_others.emplace(c.team + "/" + c.gpu_model, 0);
  }
  for (auto& [key, gpus] : reclaimed_by_others) gpus = std::min(own[key], released[key]);
  for (const Cluster& c : s.clusters)
    if (c.queued() && !seen.count(c.name)) return broken("queued cluster " + c.name + " has no decision");
  return Status::ok();
}

// Per model and team, before and after: limits, guarantees (a team that
// lost containers to another team's request holds its guarantee after the
// step, what the step admits for it and what its guaranteed requests wait
// for included), the cover, free GPUs.
Status check_teams(const Snapshot& before, const Snapshot& after, const TeamGpus& reclaimed_by_others) {
  std::map<std::string, detail::ModelState> was;
  for (detail::ModelState& model : detail::model_states(before)) was[model.name] = std::move(model);
  for (detail::ModelState& model : detail::model_states(after)) {
    detail::ModelState& old_model = was[model.name];
    if (after.pools.count(model.name) && after.pools.at(model.name).free < 0)
      return broken("model " + model.name + ": more GPUs handed out than were free");
    for (auto& [name, team] : model.teams) {
      detail::TeamState& old = old_model.team(name);
      std::string who = "team " + name + " on " + model.name;
      if (team.held > std::max(team.limit(), old.held))
        return broken(who + ": holds " + std::to_string(team.held) + " GPUs, over its limit");
      auto reclaimed = reclaimed_by_others.find(name + "/" + model.name);
      if (reclaimed != reclaimed_by_others.end() && team.used + reclaimed->second < team.quota.guaranteed)
        return broken(who + ": containers taken by another team below its guarantee");
    }
    if (model.cover() > std::max(model.capacity, old_model.cover()))
      return broken("model " + model.name + ": a floor admitted into GPUs that guarantees may claim");
  }
  return Status::ok();
}

}  // namespace

Status check_decisions(const Snapshot& snapshot, const Decisions& decisions) {
  TeamGpus reclaimed_by_others;
  EDT_RETURN_IF_ERROR(check_each(snapshot, decisions, reclaimed_by_others));
  return check_teams(snapshot, apply(snapshot, decisions), reclaimed_by_others);
}

}  // namespace edt::sched
