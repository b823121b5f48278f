// Service: clusters (create, scale, delete, reads).
#include <algorithm>
#include <chrono>

#include "control/model/cluster_json.h"
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
  auto addresses = pick_addresses(options_.addresses, tx.addresses(), to - from);
  if (!addresses.is_ok()) return addresses.status();
  auto gpus = pick_gpus(tx.gpus(), spec.gpu.model, spec.gpu.count, to - from);
  if (!gpus.is_ok()) return gpus.status();
  for (int index = from; index < to; ++index) {
    ContainerStatus c;
    c.name = container_name(spec.name, index);
    c.index = index;
    c.address = (*addresses)[static_cast<size_t>(index - from)];
    c.gpus = (*gpus)[static_cast<size_t>(index - from)];
    if (Status st = tx.hold_gpus(c.name, c.gpus); !st.is_ok()) return as_refusal(st, "gpu");
    if (Status st = tx.insert_container(spec.name, c); !st.is_ok()) {
      if (st.code() == StatusCode::kAlreadyExists)
        return conflict("containers", "container " + c.name + " still exists (" + st.message() + ")",
                        "wait until the cluster is Running, then retry");
      return as_refusal(st, "");
    }
  }
  return Status::ok();
}

Status Service::commit_and_reconcile(Database::Tx& tx, const std::string& cluster) {
  if (Status st = tx.commit(); !st.is_ok()) return as_refusal(st, "");
  if (options_.request_reconcile) options_.request_reconcile(cluster);
  return Status::ok();
}

Result<Cluster> Service::create_cluster(const User& by, const ClusterSpec& spec) {
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
  if (Status st = tx.insert_cluster(cluster); !st.is_ok()) return as_refusal(st, "");
  EDT_RETURN_IF_ERROR(allot(tx, spec, 0, spec.containers));
  const std::string event = "created by " + by.name + " with " + std::to_string(spec.containers) + " containers";
  if (Status st = tx.add_event(spec.name, EventType::kCreated, event, unix_ms()); !st.is_ok()) return as_refusal(st, "");
  auto created = tx.cluster(spec.name);
  EDT_RETURN_IF_ERROR(commit_and_reconcile(tx, spec.name));
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

Result<Cluster> Service::scale_cluster(const User& by, const std::string& name, int containers,
                                        std::optional<std::chrono::milliseconds> drain_timeout) {
  auto tx = db_->transaction();
  auto cluster = owned_cluster(tx, by, name);
  if (!cluster.is_ok()) return cluster;
  if (cluster->deleting) return conflict("containers", "cluster '" + name + "' is being deleted", "create a new cluster instead");
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
  if (containers > present) {
    // The spec's volumes were checked when it was made: any volume will do.
    EDT_RETURN_IF_ERROR(check_against_catalog(spec, tx.catalog(std::nullopt), containers - present));
    EDT_RETURN_IF_ERROR(allot(tx, spec, present, containers));
  } else if (Status st = tx.mark_leaving_from(name, containers); !st.is_ok()) {
    return as_refusal(st, "");
  }
  spec.containers = containers;
  // The phase changes with the spec, so no reader sees the new size as Running.
  Status st = tx.set_spec(name, spec);
  if (st.is_ok()) st = tx.set_status(name, Phase::kScaling, drain, cluster->ever_running);
  if (st.is_ok()) st = tx.set_scale_failure(name, "");
  const std::string event = "scale from " + std::to_string(cluster->spec.containers) + " to " +
                            std::to_string(containers) + " containers by " + by.name +
                            (drain.empty() ? "" : "; " + drain);
  if (st.is_ok()) st = tx.add_event(name, EventType::kScaling, event, unix_ms());
  if (!st.is_ok()) return as_refusal(st, "");
  auto scaled = tx.cluster(name);
  EDT_RETURN_IF_ERROR(commit_and_reconcile(tx, name));
  return *scaled;
}

Result<Cluster> Service::delete_cluster(const User& by, const std::string& name) {
  auto tx = db_->transaction();
  auto cluster = owned_cluster(tx, by, name);
  if (!cluster.is_ok()) return cluster;
  Status st = tx.add_event(name, EventType::kDeleting, "deleted by " + by.name, unix_ms());
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
  return SshAccess{std::move(*found), std::move(*key), std::move(*known_hosts), options_.backend->ssh_port()};
}

int64_t Service::version() { return db_->lock().version(); }

}  // namespace edt::control
