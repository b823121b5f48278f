// Reconciler: brings what runs in line with what the database asks for, one
// cluster at a time, in the style of a Kubernetes controller.
//
// reconcile(name) takes only the cluster's name, re-reads the spec and the
// container rows, observes each container through the backend, and does the
// next step: start a missing container, drain and stop one that is leaving,
// rewrite the cluster's hosts and hostfile, record phases. It is level-based and idempotent: running it
// again with nothing changed does nothing. It returns done, or a requeue
// after a delay while it waits (a container still starting or stopping), or
// an error, which the work queue retries with exponential backoff (reset by
// the next success). A container that fails to start fails its create (the
// whole cluster is removed, status Failed with the reason) or its scale
// (the new containers are removed, the cluster keeps running at its former
// size): a terminal outcome, recorded, not retried.
//
// The drain. A container that leaves on scale-down while Running first
// leaves the hostfile (edtrun's elastic driver sees it gone and its workers
// there leave the job at their next commit) and is Draining: it keeps
// running, listed in /etc/hosts, until the backend counts no worker of an
// edtrun job in it (Backend::training_processes), or until the cluster's
// drain_timeout has passed since the drain began (an event, DrainTimedOut,
// says how many were left); then it is stopped: SIGTERM, then SIGKILL after
// the grace period. When the drain began is stored with the container, so
// a restarted edtd keeps its deadline. A container that never ran, a
// drain_timeout of 0, and a cluster being deleted (or whose create failed)
// skip the drain: the container is SIGTERMed at once.
//
// Crash safety. A container's row (its name, address and GPUs) is written
// before its sandbox starts, and the sandbox carries a label naming the
// cluster and container (backend.h). edtd may die at any moment, between
// starting a sandbox and recording its pid included; start() first recovers:
// a sandbox that the backend identifies (running_sandboxes: by what it made
// and recorded, not by the label, which a container may rewrite) as a
// container whose recorded sandbox is not running is
// adopted (its pid recorded), and every other labelled sandbox (no row
// claims it, or its row's recorded sandbox runs) is ended, and waited for,
// before the first pass, so its address and port are free again. It does
// the same right after a pass that failed or a start that failed, which
// may leave the same behind without a crash. Every
// other step is ordered so that a pass after a crash finishes it: the
// shared files are rewritten, a leaving container is signalled again, a
// gone one's files and row are removed. The named points where a test makes
// edtd die are in control/backends/fault_points.h.
//
// The scheduler. Besides the clusters, the queue holds one more key,
// kScheduleKey (teams.h): its pass asks the scheduling policy what to place,
// grow or take back (allocation/schedule.h) and queues the clusters it
// changed. It is queued by the service after every create, scale, delete and
// quota change, here whenever a container with GPUs is gone (they are free),
// and on every resync. A shrink it decides is carried out as a scale down:
// the containers leave and drain as above.
//
// The loop that runs the passes (a worker thread, a work queue with
// backoff, the periodic resync of every cluster, the stats) is the generic
// ReconcileLoop (reconcile_loop.h); this class is only the domain half it
// drives: what one pass does, and the recovery after a failed one.
// enqueue() may be called from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "control/backends/backend.h"
#include "control/allocation/allocation.h"
#include "control/db/database.h"
#include "control/reconcile/reconcile_loop.h"

namespace edt::control {

struct ReconcilerOptions {
  std::chrono::milliseconds grace{10000};         // SIGTERM to SIGKILL when a container goes
  std::chrono::milliseconds resync{2000};         // every cluster is reconciled this often
  std::chrono::milliseconds poll{25};             // re-run while containers start or stop
  std::chrono::milliseconds start_timeout{30000}; // a container not Running by then failed
  std::chrono::milliseconds max_backoff{30000};
  // Extra environment for every container (PATH, PYTHONPATH of edt's tools).
  std::map<std::string, std::string> base_env;
  // Called after every pass over all clusters (jobs are refreshed there).
  std::function<void()> on_resync;
  // Milliseconds since the epoch; the system clock when empty (tests set it).
  std::function<int64_t()> now_ms;
  // Where the scheduler's placements take containers' addresses from (the
  // service's range).
  AddressRange addresses;
};

class Reconciler : public Reconcilable {
 public:
  Reconciler(Database* db, Backend* backend, ReconcilerOptions options);
  ~Reconciler() override;

  // Recovers the sandboxes that run (see Crash safety above), then starts
  // the loop's worker thread.
  void start();
  void stop();
  void enqueue(const std::string& cluster) { loop_.enqueue(cluster); }
  ReconcileStats stats() { return loop_.stats(); }

  // One pass for one cluster, or the scheduler's pass for kScheduleKey.
  Result<ReconcileResult> reconcile(const std::string& cluster) override;
  // Every cluster's name, and kScheduleKey.
  std::vector<std::string> keys() override;
  // A failed pass may have started a sandbox it did not record: recover
  // before the next pass, which would start the container again.
  void after_pass(const std::string& cluster, const Status& outcome) override;
  void after_resync() override;

  // Adopts each sandbox the backend identifies that its container lost track of, ends the
  // others that no container claims, and waits until they are gone.
  Status recover();

 private:
  struct Pass;  // one pass's state (reconciler.cc)

  // The scheduler's step (allocation/schedule.h) in a transaction of its
  // own; the clusters it changed are queued for a pass.
  Result<ReconcileResult> schedule_pass();

  // Drains, stops and removes the leaving containers; keeps the others (and
  // those not yet gone) in pass.records.
  Status stop_leaving(Pass& pass);
  // The next step for one leaving container that is still there.
  Status step_leaving(Pass& pass, ContainerRecord& r);
  // Whether a Draining container is done: no worker left (a Drained event)
  // or its deadline passed (a DrainTimedOut event).
  Result<bool> drain(Pass& pass, const ContainerRecord& r);
  // Starts missing containers and records the ones that became Running.
  // Returns false when a start failed (the create or scale was undone).
  Result<bool> start_and_observe(Pass& pass);
  Status record_placement(Pass& pass, ContainerRecord& r, SandboxState state, const SandboxPlacement& where);
  // Starts the containers in `missing` (pass.records') concurrently and
  // records each that started; false, with the batch undone, if one failed.
  Result<bool> start_missing(Pass& pass, const std::vector<ContainerRecord*>& missing);
  Status record_phase(Pass& pass);
  // controller_address: the launcher's, where a slurm cluster's slurmctld is.
  SandboxSpec sandbox_spec(const Cluster& cluster, const ContainerRecord& record, const Catalog& catalog,
                           const std::string& controller_address);
  // A container failed to start: undo the create or the scale that made it.
  Status fail_start(const Pass& pass, const std::string& reason);
  Status save(const ContainerRecord& record);

  Database* db_;
  Backend* backend_;
  ReconcilerOptions options_;
  bool recover_due_ = false;  // the loop's thread's only
  ReconcileLoop loop_;        // last: its thread calls the members above
};

}  // namespace edt::control
