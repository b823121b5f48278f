#include "control/reconcile/reconciler.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <future>

#include "common/log.h"
#include "control/backends/fault_points.h"
#include "control/allocation/schedule.h"
#include "control/model/cluster_json.h"
#include "control/model/container_files.h"
#include "control/model/slurm.h"

namespace edt::control {

namespace {

int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The hostfile lists the containers that are Running and not leaving; the
// hosts file also those still draining, whose workers may still reach (and
// be reached by) their peers until they leave the job.
ClusterFiles cluster_files(const std::vector<ContainerRecord>& records) {
  ClusterFiles files;
  files.hosts = "127.0.0.1\tlocalhost\n";
  std::vector<ContainerStatus> present;
  for (const auto& r : records) {
    if (r.status.leaving && r.stopping_since_ms != 0) continue;
    files.hosts += r.status.address + "\t" + r.status.name + "\n";
    present.push_back(r.status);
  }
  const std::vector<ContainerStatus> running = running_containers(present);
  files.hostfile = render_hostfile(running);
  for (const auto& c : running) {
    files.discover += c.name + ":" + std::to_string(c.gpus.empty() ? 1 : c.gpus.size()) + "\n";
    files.hostnames += c.name + "\n";
  }
  return files;
}

// Whether the cluster's row still says what a pass read from it.
bool unchanged_since(const Cluster& read, const std::optional<Cluster>& now) {
  return now && now->spec.containers == read.spec.containers && now->phase == read.phase &&
         now->message == read.message && now->scale_failure == read.scale_failure && now->deleting == read.deleting;
}

}  // namespace

// What one pass read and has decided so far.
struct Reconciler::Pass {
  Cluster cluster;
  std::vector<ContainerRecord> records;
  int64_t now = 0;       // ms since the epoch
  bool settled = true;   // nothing is starting or stopping
};

Reconciler::Reconciler(Database* db, Backend* backend, ReconcilerOptions options)
    : db_(db),
      backend_(backend),
      options_(std::move(options)),
      loop_(this, {std::chrono::milliseconds(100), options_.max_backoff, options_.resync}) {}

Reconciler::~Reconciler() { stop(); }

void Reconciler::start() {
  if (Status st = recover(); !st.is_ok()) log::error("recover the sandboxes that run: {}", st.to_string());
  loop_.start();
}

void Reconciler::stop() { loop_.stop(); }

std::vector<std::string> Reconciler::keys() {
  std::vector<std::string> keys = db_->lock().cluster_names();
  keys.push_back(kScheduleKey);
  return keys;
}

Result<ReconcileResult> Reconciler::schedule_pass() {
  std::vector<std::string> changed;
  {
    auto tx = db_->transaction();
    const int64_t now = options_.now_ms ? options_.now_ms() : system_now_ms();
    EDT_RETURN_IF_ERROR(schedule(tx, options_.addresses, now, &changed));
    EDT_RETURN_IF_ERROR(tx.commit());
  }
  for (const auto& cluster : changed) loop_.enqueue(cluster);
  return ReconcileResult{};
}

void Reconciler::after_resync() {
  if (options_.on_resync) options_.on_resync();
}

void Reconciler::after_pass(const std::string& /*cluster*/, const Status& outcome) {
  if (!outcome.is_ok()) recover_due_ = true;  // a sandbox may have started unrecorded
  if (!recover_due_) return;
  Status st = recover();
  recover_due_ = !st.is_ok();
  if (!st.is_ok()) log::warn("recover the sandboxes that run: {} (again after the next pass)", st.to_string());
}

Status Reconciler::recover() {
  EDT_ASSIGN_OR_RETURN(std::vector<FoundSandbox> found, backend_->running_sandboxes());
  struct Claim {
    std::string cluster;
    ContainerRecord record;
  };
  std::map<std::string, Claim> claims;  // by container name
  {
    auto tx = db_->lock();
    for (const auto& cluster : tx.cluster_names())
      for (auto& r : tx.containers(cluster)) {
        const std::string name = r.status.name;
        claims[name] = {cluster, std::move(r)};
      }
  }
  const int64_t now = options_.now_ms ? options_.now_ms() : system_now_ms();
  std::vector<SandboxRef> keep;
  for (const auto& f : found) {
    auto claim = claims.find(f.name);
    if (claim == claims.end() || claim->second.cluster != f.cluster) continue;
    ContainerRecord& r = claim->second.record;
    if (r.sandbox == f.ref) {
      keep.push_back(f.ref);
      continue;
    }
    // A second sandbox of a container whose recorded one runs is a stray.
    if (backend_->observe(r.status.name, r.sandbox) != SandboxState::kGone) continue;
    // As start_and_observe records a sandbox it started (a Running one
    // whose sandbox had died was being started again).
    r.sandbox = f.ref;
    if (!r.status.leaving) {
      r.status.phase = Phase::kCreating;
      r.status.started_at = 0;
      r.creating_since_ms = now;
    }
    EDT_RETURN_IF_ERROR(save(r));
    log::info("adopted the sandbox (pid {}) of container {}: it was started, its pid not recorded", f.ref.pid,
              f.name);
    keep.push_back(f.ref);
  }
  EDT_ASSIGN_OR_RETURN(int ended, backend_->end_sandboxes_except(keep));
  if (ended > 0) log::warn("ended {} stray sandbox processes that no container of the store claims", ended);
  for (const auto& f : found)
    if (!claims.count(f.name)) EDT_RETURN_IF_ERROR(backend_->remove(f.name));
  return Status::ok();
}

Status Reconciler::save(const ContainerRecord& record) { return db_->lock().update_container(record); }

SandboxSpec Reconciler::sandbox_spec(const Cluster& cluster, const ContainerRecord& record, const Catalog& catalog,
                                     const std::string& controller_address) {
  const ClusterSpec& spec = cluster.spec;
  SandboxSpec s;
  s.cluster = spec.name;
  s.name = record.status.name;
  s.address = record.status.address;
  auto image = catalog.images.find(spec.image);
  s.image_root = image == catalog.images.end() ? "/" : image->second.root;
  s.image_user = image == catalog.images.end() ? "" : image->second.user;
  s.shm_bytes = spec.shm_bytes;
  s.memory_bytes = spec.memory_bytes;
  s.cpu_millis = spec.cpu_millis;
  for (const auto& m : spec.mounts) {
    auto volume = catalog.volumes.find(m.volume);
    if (volume != catalog.volumes.end()) s.mounts.push_back({volume->second.host_path, m.path, m.read_only});
  }
  s.env = container_env(spec, record.status,
                        image == catalog.images.end() ? options_.base_env : image_base_env(image->second, options_.base_env));
  s.job_dir = spec.framework == "deepspeed";
  s.gpus = record.status.gpus;
  s.gpu_model = spec.gpu.model;
  if (auto range = catalog.user_ranges.find(cluster.owner); range != catalog.user_ranges.end())
    s.id_range = range->second;
  if (spec.framework == "slurm") {
    SandboxSlurm slurm_files;
    slurm_files.slurm_conf = slurm::render_slurm_conf(spec, controller_address, false);
    slurm_files.daemons_conf = slurm::render_slurm_conf(spec, controller_address, true);
    slurm_files.cgroup_conf = slurm::render_cgroup_conf();
    slurm_files.gres_conf = slurm::render_gres_conf(spec, record.status.gpus);
    slurm_files.node_conf = slurm::node_conf(spec, record.status.gpus);
    slurm_files.controller = record.status.index == 0;
    s.slurm = std::move(slurm_files);
  }
  return s;
}

Status Reconciler::fail_start(const Pass& pass, const std::string& reason) {
  const Cluster& cluster = pass.cluster;
  const std::string& name = cluster.spec.name;
  recover_due_ = true;  // a start cut short may have left a process of its sandbox
  std::vector<std::string> undo;
  int keep = 0;
  for (const auto& r : pass.records) {
    if (r.status.leaving) continue;
    if (!cluster.ever_running || r.status.phase != Phase::kRunning) {
      undo.push_back(r.status.name);
    } else {
      ++keep;
    }
  }
  auto tx = db_->transaction();
  // A scale or a delete since this pass read the cluster: undoing to the
  // size it read would undo that too. Write nothing; the next pass sees the
  // failure again (a start that failed is retried) and undoes from there.
  if (!unchanged_since(cluster, tx.cluster(name))) return Status::ok();
  EDT_RETURN_IF_ERROR(tx.mark_leaving(undo));
  EDT_RETURN_IF_ERROR(tx.add_event(name, EventType::kFailed, reason, pass.now));
  if (!cluster.ever_running) {
    EDT_RETURN_IF_ERROR(tx.set_status(name, Phase::kFailed, reason, false));
    return tx.commit();
  }
  ClusterSpec spec = cluster.spec;
  spec.containers = keep;
  const std::string failure = "scale to " + std::to_string(cluster.spec.containers) + " failed: " + reason +
                              "; back to " + std::to_string(keep);
  EDT_RETURN_IF_ERROR(tx.set_spec(name, spec));
  EDT_RETURN_IF_ERROR(tx.set_status(name, Phase::kScaling, failure, true));
  EDT_RETURN_IF_ERROR(tx.set_scale_failure(name, failure));
  return tx.commit();
}

Status Reconciler::stop_leaving(Pass& pass) {
  const std::string& name = pass.cluster.spec.name;
  // Containers that leave are first taken out of the shared files, then
  // drained or stopped.
  const bool newly_leaving = std::any_of(pass.records.begin(), pass.records.end(), [](auto& r) {
    return r.status.leaving && r.draining_since_ms == 0 && r.stopping_since_ms == 0;
  });
  if (newly_leaving && !pass.cluster.deleting) {
    EDT_RETURN_IF_ERROR(backend_->write_cluster_files(name, cluster_files(pass.records)));
    fault_point("leave.files_written");
  }
  std::vector<ContainerRecord> remaining;
  for (auto& r : pass.records) {
    if (!r.status.leaving) {
      remaining.push_back(r);
      continue;
    }
    if (backend_->observe(r.status.name, r.sandbox) != SandboxState::kGone) {
      pass.settled = false;
      EDT_RETURN_IF_ERROR(step_leaving(pass, r));
      remaining.push_back(r);
      continue;
    }
    EDT_RETURN_IF_ERROR(backend_->remove(r.status.name));
    fault_point("leave.removed");
    EDT_RETURN_IF_ERROR(db_->lock().delete_container(r.status.name));
    // Its GPUs are free: a queued request or an elastic cluster may take them.
    if (!r.status.gpus.empty()) loop_.enqueue(kScheduleKey);
  }
  pass.records = std::move(remaining);
  return Status::ok();
}

Status Reconciler::step_leaving(Pass& pass, ContainerRecord& r) {
  if (r.stopping_since_ms != 0) {
    if (pass.now - r.stopping_since_ms >= options_.grace.count()) return backend_->signal(r.sandbox, SIGKILL);
    return Status::ok();
  }
  // A cluster that ends (deleted, or its create failed) waits for no drain.
  const bool ending = pass.cluster.deleting || pass.cluster.phase == Phase::kFailed;
  const std::chrono::milliseconds timeout = pass.cluster.spec.drain_timeout;
  if (!ending && r.status.phase == Phase::kRunning && timeout.count() > 0) {
    r.status.phase = Phase::kDraining;
    r.status.message = "left the hostfile; stops once no edtrun worker is left in it (at most " +
                       format_duration(timeout) + ")";
    r.draining_since_ms = pass.now;
    EDT_RETURN_IF_ERROR(save(r));
  }
  if (!ending && r.status.phase == Phase::kDraining) {
    EDT_ASSIGN_OR_RETURN(bool drained, drain(pass, r));
    if (!drained) return Status::ok();
  }
  EDT_RETURN_IF_ERROR(backend_->signal(r.sandbox, SIGTERM));
  fault_point("leave.signalled");
  r.stopping_since_ms = pass.now;
  r.status.phase = Phase::kStopping;
  return save(r);
}

Result<bool> Reconciler::drain(Pass& pass, const ContainerRecord& r) {
  const std::string& name = pass.cluster.spec.name;
  const int64_t waited = pass.now - r.draining_since_ms;
  const bool late = waited >= pass.cluster.spec.drain_timeout.count();
  Result<int> workers = backend_->training_processes(r.sandbox);
  if (!workers.is_ok() && !late) return workers.status().with_context("count the workers in " + r.status.name);
  if (workers.is_ok() && *workers > 0 && !late) return false;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f s", static_cast<double>(waited) / 1000);
  if (workers.is_ok() && *workers == 0) {
    EDT_RETURN_IF_ERROR(db_->lock().add_event(name, EventType::kDrained,
                                              r.status.name + " drained in " + seconds +
                                                  ": no edtrun worker left in it; stopping it",
                                              pass.now));
    return true;
  }
  const std::string left = workers.is_ok() ? std::to_string(*workers) + " edtrun worker process" +
                                                 (*workers == 1 ? " was" : "es were") + " still in it"
                                           : "its workers could not be counted (" + workers.status().message() + ")";
  EDT_RETURN_IF_ERROR(db_->lock().add_event(
      name, EventType::kDrainTimedOut,
      r.status.name + ": drain timed out after " + format_duration(pass.cluster.spec.drain_timeout) + "; " + left +
          "; stopping it (SIGTERM, SIGKILL after " + format_duration(options_.grace) + ")",
      pass.now));
  return true;
}

Result<bool> Reconciler::start_and_observe(Pass& pass) {
  const std::string& name = pass.cluster.spec.name;
  std::vector<ContainerRecord*> missing;
  for (auto& r : pass.records) {
    if (r.status.leaving) continue;
    SandboxState state = backend_->observe(r.status.name, r.sandbox);
    const SandboxPlacement where = backend_->placement(r.sandbox);
    const std::string how = where.reason.empty() ? "" : " (" + where.reason + ")";
    if (state == SandboxState::kGone) {
      const bool was_started = r.sandbox.pid != 0;
      if (was_started && r.status.phase != Phase::kRunning) {
        EDT_RETURN_IF_ERROR(fail_start(pass, "container " + r.status.name + " exited while starting" + how));
        return false;
      }
      if (was_started) {
        r.status.message = "restarted after it stopped" + how;
        EDT_RETURN_IF_ERROR(db_->lock().add_event(
            name, EventType::kRestarted, r.status.name + " stopped" + how + " and was started again", pass.now));
      }
      missing.push_back(&r);
      continue;
    }
    EDT_RETURN_IF_ERROR(record_placement(pass, r, state, where));
    if (state == SandboxState::kQueued) {
      pass.settled = false;
    } else if (state == SandboxState::kStarting) {
      if (pass.now - r.creating_since_ms > options_.start_timeout.count()) {
        EDT_RETURN_IF_ERROR(fail_start(pass, "container " + r.status.name + " did not start within " +
                                                 std::to_string(options_.start_timeout.count()) + " ms"));
        return false;
      }
      pass.settled = false;
    } else if (r.status.phase != Phase::kRunning) {
      r.status.phase = Phase::kRunning;
      r.status.started_at = pass.now / 1000;
      EDT_RETURN_IF_ERROR(save(r));
    }
  }
  return start_missing(pass, missing);
}

// A container its engine has placed, or keeps waiting: its node and job,
// and while it waits, Pending with the engine's reason; the start timeout
// counts from when it was placed.
Status Reconciler::record_placement(Pass& pass, ContainerRecord& r, SandboxState state, const SandboxPlacement& where) {
  bool changed = r.status.node != where.node || r.status.slurm_job != where.job;
  r.status.node = where.node;
  r.status.slurm_job = where.job;
  if (state == SandboxState::kQueued) {
    const std::string message = where.reason.empty() ? "waiting to be placed" : where.reason;
    changed = changed || r.status.phase != Phase::kPending || r.status.message != message ||
              pass.now - r.creating_since_ms >= 1000;
    r.status.phase = Phase::kPending;
    r.status.message = message;
    r.creating_since_ms = pass.now;
  } else if (r.status.phase == Phase::kPending) {
    r.status.phase = Phase::kCreating;
    r.status.message.clear();
    changed = true;
  }
  return changed ? save(r) : Status::ok();
}

// A start mostly waits (ssh-keygen, bubblewrap making the namespaces), so
// the containers of a scale start at once; they are recorded in order.
Result<bool> Reconciler::start_missing(Pass& pass, const std::vector<ContainerRecord*>& missing) {
  if (missing.empty()) return true;
  const Catalog catalog = db_->lock().catalog(std::nullopt);
  // The launcher's address: where a slurm cluster's slurmctld listens.
  std::string launcher_address;
  for (const auto& r : pass.records)
    if (r.status.index == 0) launcher_address = r.status.address;
  std::vector<std::future<Result<SandboxRef>>> starts;
  for (const ContainerRecord* r : missing)
    starts.push_back(std::async(std::launch::async, [this, spec = sandbox_spec(pass.cluster, *r, catalog,
                                                                               launcher_address)] {
      return backend_->start(spec);
    }));
  std::vector<Result<SandboxRef>> refs;
  for (auto& start : starts) refs.push_back(start.get());
  std::string failure;
  for (size_t i = 0; i < missing.size(); ++i) {
    if (!refs[i].is_ok()) {
      if (failure.empty()) failure = refs[i].status().message();
      continue;
    }
    ContainerRecord& r = *missing[i];
    fault_point("start.before_record");
    r.sandbox = *refs[i];
    r.status.phase = Phase::kCreating;
    r.status.started_at = 0;
    r.creating_since_ms = pass.now;
    EDT_RETURN_IF_ERROR(save(r));
    fault_point("start.recorded");
    pass.settled = false;
  }
  if (failure.empty()) return true;
  // The others of the batch are recorded, so the undo stops them too.
  EDT_RETURN_IF_ERROR(fail_start(pass, failure));
  return false;
}

Status Reconciler::record_phase(Pass& pass) {
  const Cluster& cluster = pass.cluster;
  const std::string& name = cluster.spec.name;
  const bool all_running = std::all_of(pass.records.begin(), pass.records.end(), [](auto& r) {
    return !r.status.leaving && r.status.phase == Phase::kRunning;
  });
  const Phase next = all_running ? Phase::kRunning : cluster.ever_running ? Phase::kScaling : Phase::kCreating;
  std::string message = cluster.message;
  if (all_running) {
    message = cluster.scale_failure.empty() ? std::to_string(pass.records.size()) + " of " +
                                                  std::to_string(cluster.spec.containers) + " containers Running"
                                            : cluster.scale_failure;
  }
  pass.settled = pass.settled && all_running;
  if (next == cluster.phase && message == cluster.message) return Status::ok();
  if (all_running && cluster.phase != Phase::kRunning) fault_point("running.before_record");
  auto tx = db_->transaction();
  // A scale or a delete since this pass read the cluster makes what it saw
  // stale (a scale to 4 is not Running because the 2 it saw are): write
  // nothing, the next pass (the change enqueued one) decides.
  if (!unchanged_since(cluster, tx.cluster(name))) {
    pass.settled = false;
    return Status::ok();
  }
  EDT_RETURN_IF_ERROR(tx.set_status(name, next, message, cluster.ever_running || all_running));
  if (all_running && cluster.phase != Phase::kRunning)
    EDT_RETURN_IF_ERROR(tx.add_event(name, EventType::kRunning, message, pass.now));
  return tx.commit();
}

Result<ReconcileResult> Reconciler::reconcile(const std::string& name) {
  if (name == kScheduleKey) return schedule_pass();
  Pass pass;
  {
    auto tx = db_->lock();
    auto cluster = tx.cluster(name);
    if (!cluster) return ReconcileResult{};
    pass.cluster = std::move(*cluster);
    pass.records = tx.containers(name);
  }
  // A create still queued has nothing to run yet: the scheduler places it.
  if (pass.records.empty() && pass.cluster.queued.waiting() && !pass.cluster.deleting) return ReconcileResult{};
  pass.now = options_.now_ms ? options_.now_ms() : system_now_ms();
  const ReconcileResult again{options_.poll};
  const bool ending = pass.cluster.deleting || pass.cluster.phase == Phase::kFailed;
  if (!ending) EDT_RETURN_IF_ERROR(backend_->prepare_cluster(name));
  EDT_RETURN_IF_ERROR(stop_leaving(pass));
  if (ending) {
    if (!pass.records.empty()) return again;
    EDT_RETURN_IF_ERROR(backend_->remove_cluster(name));
    if (pass.cluster.deleting) {
      fault_point("delete.cluster_removed");
      EDT_RETURN_IF_ERROR(db_->lock().delete_cluster(name));
    }
    return ReconcileResult{};
  }
  EDT_ASSIGN_OR_RETURN(bool started, start_and_observe(pass));
  if (!started) return again;
  EDT_RETURN_IF_ERROR(backend_->write_cluster_files(name, cluster_files(pass.records)));
  EDT_RETURN_IF_ERROR(record_phase(pass));
  return pass.settled ? ReconcileResult{} : again;
}

}  // namespace edt::control
