// Service: clusters (create, scale, delete, reads).
#include <algorithm>
#include <chrono>

#include "control/allocation/allot.h"
#include "control/allocation/schedule.h"
#include "control/model/cluster_json.h"
#include "control/model/teams.h"
#include "control/service/service.h"

namespace edt::control {

namespace {

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Status admin_only(const std::string& action) { return forbidden("", "only the admin may " + action, "ask the admin"); }

Service::Service(Database* db, ServiceOptions options) : db_(db), options_(std::move(options)) {}

Result<Cluster> Service::owned_cluster(Database::Tx& tx, const User& by, const std::string& name) {
  // Another user's cluster is answered for as a missing one: a read tells
  // no one which names others use.
  auto cluster = tx.cluster(name);
  if (!cluster || (!by.admin && cluster->owner != by.name))
    return missing("name", "cluster '" + name + "' does not exist", "see edt cluster list");
  return *cluster;
}

Status Service::allot(Database::Tx& tx, const ClusterSpec& spec, int from, int to) {
  return allot_containers(tx, options_.addresses, spec, from, to);
}

Status Service::commit_and_reconcile(Database::Tx& tx, const std::string& cluster,
                                     const std::vector<std::string>& scheduled) {
  if (Status st = tx.commit(); !st.is_ok()) return as_refusal(st, "");
  if (!options_.request_reconcile) return Status::ok();
  options_.request_reconcile(cluster);
  for (const auto& other : scheduled)
    if (other != cluster) options_.request_reconcile(other);
  // What changed GPUs, clusters or quotas may let a queued request start.
  options_.request_reconcile(kScheduleKey);
  return Status::ok();
}

Result<std::vector<std::string>> Service::queue_request(Database::Tx& tx, const Cluster& cluster, int containers) {
  const std::string& name = cluster.spec.name;
  EDT_RETURN_IF_ERROR(as_refusal(tx.set_queued(name, {containers, unix_ms(), 0, "waiting for the scheduler"}), ""));
  std::vector<std::string> scheduled;
  EDT_RETURN_IF_ERROR(as_refusal(schedule(tx, options_.addresses, unix_ms(), &scheduled), "containers"));
  auto now = tx.cluster(name);
  if (now && now->queued.waiting()) {
    const std::string event = "queued for " + std::to_string(containers) + " containers (position " +
                              std::to_string(std::max(now->queued.position, 1)) + "): " + now->queued.reason +
                              "; delete the cluster" + (cluster.ever_running ? " or scale again" : "") +
                              " to cancel";
    EDT_RETURN_IF_ERROR(as_refusal(tx.add_event(name, EventType::kQueued, event, unix_ms()), ""));
  }
  return scheduled;
}

Result<Cluster> Service::create_cluster(const User& by, const ClusterSpec& spec) {
  if (options_.backend) EDT_RETURN_IF_ERROR(options_.backend->accepts(spec));
  auto tx = db_->transaction();
  EDT_RETURN_IF_ERROR(check_still_a_user(tx, by));
  if (tx.cluster(spec.name))
    return conflict("name", "the cluster name '" + spec.name + "' is taken",
                    "choose another name (cluster names are shared by all users), or delete your cluster of that name");
  const Catalog catalog = tx.catalog(by.admin ? std::nullopt : std::optional<std::string>(by.name));
  EDT_RETURN_IF_ERROR(check_against_catalog(spec, catalog, spec.containers));
  Cluster cluster;
  cluster.spec = spec;
  cluster.owner = by.name;
  cluster.created_at = unix_ms() / 1000;
  // A cluster with GPUs is the scheduler's: queued, and placed at once
  // when the policy admits it (schedule.h).
  const bool scheduled = spec.gpu.count > 0;
  if (scheduled) cluster.message = "queued: waiting for GPUs";
  if (Status st = tx.insert_cluster(cluster); !st.is_ok()) return as_refusal(st, "");
  const std::string event = "created by " + by.name + " with " + std::to_string(spec.containers) + " containers" +
                            (spec.elastic.elastic() ? " (elastic " + std::to_string(spec.elastic.min) + ".." +
                                                          std::to_string(spec.elastic.max) + ")"
                                                    : "");
  if (Status st = tx.add_event(spec.name, EventType::kCreated, event, unix_ms()); !st.is_ok()) return as_refusal(st, "");
  std::vector<std::string> placed;
  if (scheduled) {
    auto queued = queue_request(tx, cluster, spec.elastic.elastic() ? spec.elastic.min : spec.containers);
    if (!queued.is_ok()) return queued.status();
    placed = std::move(*queued);
  } else {
    EDT_RETURN_IF_ERROR(allot(tx, spec, 0, spec.containers));
  }
  auto created = tx.cluster(spec.name);
  EDT_RETURN_IF_ERROR(commit_and_reconcile(tx, spec.name, placed));
  return *created;
}

// What a scale down tells people: which containers leave, and that they
// drain first.
std::string drain_note(const Cluster& cluster, const std::chrono::milliseconds timeout, int containers) {
  std::string names;
  int count = 0;
  for (const auto& c : cluster.containers)
    if (!c.leaving && c.index >= containers) names += (count++ ? ", " : "") + c.name;
  if (count == 0) return "";
  const bool one = count == 1;
  if (timeout.count() == 0) return names + (one ? " leaves the hostfile and stops" : " leave the hostfile and stop") +
                                   " (drain_timeout 0s)";
  return names + (one ? " leaves the hostfile and drains: it stops once no edtrun worker is left in it"
                      : " leave the hostfile and drain: they stop once no edtrun worker is left in them") +
         ", at most " + format_duration(timeout) + " from now";
}

// The Scaling event of a user's scale request.
static std::string scale_event(const Cluster& cluster, int containers, const User& by, const std::string& drain) {
  return "scale from " + std::to_string(cluster.spec.containers) + " to " + std::to_string(containers) +
         " containers by " + by.name + (drain.empty() ? "" : "; " + drain);
}

Result<Cluster> Service::scale_cluster(const User& by, const std::string& name, int containers,
                                        std::optional<std::chrono::milliseconds> drain_timeout) {
  auto tx = db_->transaction();
  auto cluster = owned_cluster(tx, by, name);
  if (!cluster.is_ok()) return cluster;
  if (cluster->deleting) return conflict("containers", "cluster '" + name + "' is being deleted", "create a new cluster instead");
  if (cluster->spec.elastic.elastic())
    return conflict("containers",
                    "cluster '" + name + "' is elastic (" + std::to_string(cluster->spec.elastic.min) + ".." +
                        std::to_string(cluster->spec.elastic.max) + " containers): the scheduler sizes it",
                    "leave its size to the scheduler, or delete it and create it with other bounds");
  if (cluster->containers.empty() && cluster->queued.waiting())
    return conflict("containers", "cluster '" + name + "' is still queued to be created",
                    "wait until it is Running, or delete it and create it at another size");
  int present = 0;
  for (const auto& c : cluster->containers) present = std::max(present, c.index + 1);
  for (const auto& c : cluster->containers) {
    if (c.leaving && c.index < containers)
      return conflict("containers", "container " + c.name + " is still draining or stopping",
                      "wait until the cluster is Running, then scale again");
  }
  ClusterSpec spec = cluster->spec;
  EDT_RETURN_IF_ERROR(check_megatron_parallel(spec, containers, "containers"));
  if (drain_timeout) spec.drain_timeout = *drain_timeout;
  const std::string drain = drain_note(*cluster, spec.drain_timeout, containers);
  // A new scale withdraws a queued one.
  if (Status st = tx.set_queued(name, {}); !st.is_ok()) return as_refusal(st, "");
  std::vector<std::string> placed;
  if (containers > present) {
    // The spec's volumes were checked when it was made: any volume will do.
    EDT_RETURN_IF_ERROR(check_against_catalog(spec, tx.catalog(std::nullopt), containers));
    if (spec.gpu.count > 0) {
      // The scheduler places it, now or when GPUs free up; the size stays until then.
      Status st = tx.set_spec(name, spec);
      if (st.is_ok()) st = tx.add_event(name, EventType::kScaling, scale_event(*cluster, containers, by, ""), unix_ms());
      if (!st.is_ok()) return as_refusal(st, "");
      auto queued = queue_request(tx, *cluster, containers);
      if (!queued.is_ok()) return queued.status();
      auto now = tx.cluster(name);
      EDT_RETURN_IF_ERROR(commit_and_reconcile(tx, name, *queued));
      return *now;
    }
    EDT_RETURN_IF_ERROR(allot(tx, spec, present, containers));
  } else if (Status st = containers < present ? tx.mark_leaving_from(name, containers) : Status::ok(); !st.is_ok()) {
    return as_refusal(st, "");
  }
  spec.containers = containers;
  // The phase changes with the spec, so no reader sees the new size as Running.
  Status st = tx.set_spec(name, spec);
  if (st.is_ok()) st = tx.set_status(name, Phase::kScaling, drain, cluster->ever_running);
  if (st.is_ok()) st = tx.set_scale_failure(name, "");
  if (st.is_ok()) st = tx.add_event(name, EventType::kScaling, scale_event(*cluster, containers, by, drain), unix_ms());
  if (!st.is_ok()) return as_refusal(st, "");
  auto scaled = tx.cluster(name);
  EDT_RETURN_IF_ERROR(commit_and_reconcile(tx, name));
  return *scaled;
}

Result<Cluster> Service::delete_cluster(const User& by, const std::string& name) {
  auto tx = db_->transaction();
  auto cluster = owned_cluster(tx, by, name);
  if (!cluster.is_ok()) return cluster;
  Status st = tx.add_event(name, EventType::kDeleting,
                           "deleted by " + by.name + (cluster->queued.waiting() ? "; its queued request is cancelled" : ""),
                           unix_ms());
  if (st.is_ok()) st = tx.set_queued(name, {});
  if (st.is_ok()) st = tx.mark_deleting(name);
  if (!st.is_ok()) return as_refusal(st, "name");
  auto marked = tx.cluster(name);
  EDT_RETURN_IF_ERROR(commit_and_reconcile(tx, name));
  return *marked;
}

Result<Cluster> Service::cluster(const User& by, const std::string& name) {
  auto tx = db_->lock();
  return owned_cluster(tx, by, name);
}

std::vector<Cluster> Service::clusters(const User& by) {
  std::vector<Cluster> out;
  for (auto& c : db_->lock().clusters())
    if (by.admin || c.owner == by.name) out.push_back(std::move(c));
  return out;
}

Cluster Service::shown(Cluster cluster) {
  if (options_.backend)
    for (auto& c : cluster.containers) c.address = options_.backend->shown_address(c);
  return cluster;
}

Result<std::vector<ClusterEvent>> Service::events(const User& by, const std::string& name) {
  auto tx = db_->lock();
  auto cluster = owned_cluster(tx, by, name);
  if (!cluster.is_ok()) return cluster.status();
  return tx.events(name);
}

Result<std::vector<ContainerRecord>> Service::containers(const User& by, const std::string& name) {
  auto tx = db_->lock();
  auto cluster = owned_cluster(tx, by, name);
  if (!cluster.is_ok()) return cluster.status();
  return tx.containers(name);
}

Result<SshAccess> Service::ssh_access(const User& by, const std::string& name) {
  EDT_RETURN_IF_ERROR(check_has(options_.backend, "a backend"));
  auto found = cluster(by, name);
  if (!found.is_ok()) return found.status();
  const std::string fix = "wait until the cluster is Running";
  auto key = options_.backend->ssh_private_key(found->spec.name);
  if (!key.is_ok()) return conflict("name", key.status().message(), fix);
  auto known_hosts = options_.backend->ssh_known_hosts(found->spec.name);
  if (!known_hosts.is_ok()) return conflict("name", known_hosts.status().message(), fix);
  std::map<std::string, SshEndpoint> endpoints;
  for (const auto& c : found->containers) endpoints[c.name] = options_.backend->ssh_endpoint(c.name, c.address);
  return SshAccess{std::move(*found), std::move(*key), std::move(*known_hosts), options_.backend->ssh_port(),
                   std::move(endpoints)};
}

int64_t Service::version() { return db_->lock().version(); }

}  // namespace edt::control
