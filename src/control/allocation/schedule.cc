#include "control/allocation/schedule.h"

#include <algorithm>
#include <set>

#include "common/log.h"
#include "control/allocation/allot.h"
#include "control/model/cluster_json.h"
#include "control/model/teams.h"

namespace edt::control {

namespace {

// Containers not leaving: what a cluster holds, or is shrinking to.
int staying(const Cluster& c) {
  return static_cast<int>(std::count_if(c.containers.begin(), c.containers.end(), [](auto& k) { return !k.leaving; }));
}

// GPU-seconds its running containers have held by `now_s` (unix seconds;
// containers that left before are not counted): the policy's service levels.
int64_t service_gpu_s(const Cluster& c, int64_t now_s) {
  int64_t service = 0;
  for (const auto& k : c.containers)
    if (!k.leaving && k.started_at > 0 && now_s > k.started_at)
      service += static_cast<int64_t>(k.gpus.size()) * (now_s - k.started_at);
  return service;
}

sched::Cluster policy_cluster(const Cluster& c, int64_t now_s) {
  sched::Cluster p;
  p.name = c.spec.name;
  p.team = c.team;
  p.priority = c.spec.priority;
  p.arrival = c.queued.waiting() ? c.queued.since_ms : c.created_at * 1000;
  p.gpu_model = c.spec.gpu.model;
  p.gpus_per_container = c.spec.gpu.count;
  p.containers = staying(c);
  // Leaving containers hold their GPUs until they are gone: the policy
  // counts them against the team's limit (sched::Cluster::draining).
  p.draining = static_cast<int>(c.containers.size()) - p.containers;
  p.service_gpu_s = service_gpu_s(c, now_s);
  if (c.spec.elastic.elastic()) {
    p.min_containers = c.spec.elastic.min;
    p.max_containers = c.spec.elastic.max;
  } else {
    // A fixed cluster waiting to grow asks for the size it waits for.
    p.min_containers = p.max_containers = c.queued.waiting() ? c.queued.containers : c.spec.containers;
  }
  p.containers = std::min(p.containers, p.max_containers);
  return p;
}

std::vector<sched::Team> policy_teams(Database::Tx& tx, const std::set<std::string>& models) {
  std::vector<sched::Team> teams;
  std::vector<std::string> names = tx.teams();
  names.insert(names.begin(), "");  // users without a team
  const std::vector<Quota> quotas = tx.quotas();
  for (const auto& name : names) {
    sched::Team team{name, {}};
    for (const auto& model : models) {
      const Quota* q = find_quota(quotas, name, model);
      team.quotas[model] = q ? sched::Quota{q->guaranteed, q->borrow_limit} : sched::Quota{0, sched::kUnlimited};
    }
    teams.push_back(std::move(team));
  }
  return teams;
}

std::string event_text(const sched::Decision& d, const Cluster& c) {
  const std::string to = std::to_string(d.containers) + " containers";
  switch (d.action) {
    case sched::Action::kAdmit: return "placed at " + to + (d.reason.empty() ? "" : " (" + d.reason + ")");
    case sched::Action::kGrow:
      return "grew from " + std::to_string(staying(c)) + " to " + to + " into idle GPUs" +
             (d.reason.empty() ? "" : " (" + d.reason + ")");
    default:
      return "shrunk from " + std::to_string(staying(c)) + " to " + to + ": " +
             (d.reason.empty() ? "borrowed GPUs taken back" : d.reason) +
             "; the containers that leave drain at their job's next commit";
  }
}

// Whether containers [from, to) can be allotted: none of those indexes is
// still taken by a container that leaves.
bool indexes_free(const Cluster& c, int from, int to) {
  return std::none_of(c.containers.begin(), c.containers.end(),
                      [&](auto& k) { return k.leaving && k.index >= from && k.index < to; });
}

Status resize(Database::Tx& tx, const AddressRange& addresses, const sched::Decision& d, const Cluster& c,
              int64_t now_ms) {
  const int present = staying(c);
  if (d.containers > present) {
    EDT_RETURN_IF_ERROR(allot_containers(tx, addresses, c.spec, present, d.containers));
  } else {
    EDT_RETURN_IF_ERROR(tx.mark_leaving_from(c.spec.name, d.containers));
  }
  ClusterSpec spec = c.spec;
  spec.containers = d.containers;
  EDT_RETURN_IF_ERROR(tx.set_spec(c.spec.name, spec));
  const bool placed_now = d.action == sched::Action::kAdmit || (c.queued.waiting() && d.containers >= c.queued.containers);
  if (placed_now) EDT_RETURN_IF_ERROR(tx.set_queued(c.spec.name, {}));
  const Phase phase = present == 0 ? Phase::kCreating : Phase::kScaling;
  EDT_RETURN_IF_ERROR(tx.set_status(c.spec.name, phase, event_text(d, c), c.ever_running));
  // A request placed in the transaction that made it never waited (no pass
  // gave it a position): its Created or Scaling event says it all.
  if (d.action == sched::Action::kAdmit && c.queued.position == 0) return Status::ok();
  return tx.add_event(c.spec.name, EventType::kScheduled, event_text(d, c), now_ms);
}

Status record_wait(Database::Tx& tx, const sched::Decision& d, const Cluster& c) {
  QueuedRequest q = c.queued;
  if (!q.waiting()) return Status::ok();  // an elastic cluster below its min after a failure: nothing asked
  std::string reason = d.reason.empty() ? "waiting for GPUs" : d.reason;
  if (d.guaranteed) reason += " (within its team's guarantee: borrowed containers are being drained for it)";
  if (q.position == d.position && q.reason == reason) return Status::ok();
  q.position = d.position;
  q.reason = reason;
  return tx.set_queued(c.spec.name, q);
}

}  // namespace

sched::Snapshot schedule_snapshot(Database::Tx& tx, int64_t now_ms) {
  sched::Snapshot snapshot;
  std::set<std::string> models;
  for (const auto& g : tx.gpus()) {
    models.insert(g.model);
    snapshot.pools[g.model].free += g.held ? 0 : 1;
  }
  for (const auto& c : tx.clusters()) {
    for (const auto& k : c.containers)
      if (k.leaving) snapshot.pools[c.spec.gpu.model].releasing += static_cast<int>(k.gpus.size());
    if (c.spec.gpu.count <= 0 || c.deleting || c.phase == Phase::kFailed) continue;
    snapshot.clusters.push_back(policy_cluster(c, now_ms / 1000));
  }
  snapshot.teams = policy_teams(tx, models);
  return snapshot;
}

Status schedule(Database::Tx& tx, const AddressRange& addresses, int64_t now_ms, std::vector<std::string>* changed) {
  const sched::Snapshot snapshot = schedule_snapshot(tx, now_ms);
  EDT_ASSIGN_OR_RETURN(sched::Decisions decisions, sched::decide(snapshot));
  for (const auto& d : decisions.decisions) {
    auto cluster = tx.cluster(d.cluster);
    if (!cluster) continue;
    if (d.action == sched::Action::kWait) {
      EDT_RETURN_IF_ERROR(record_wait(tx, d, *cluster));
      continue;
    }
    const int present = staying(*cluster);
    if (d.containers > present && !indexes_free(*cluster, present, d.containers)) continue;  // a later pass
    EDT_RETURN_IF_ERROR(resize(tx, addresses, d, *cluster, now_ms));
    changed->push_back(d.cluster);
  }
  return Status::ok();
}

}  // namespace edt::control
