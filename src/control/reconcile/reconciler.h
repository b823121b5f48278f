// Reconciler: brings what runs in line with what the store asks for, one
// cluster at a time, in the style of a Kubernetes controller.
//
// reconcile(name) takes only the cluster's name, re-reads the spec and the
// container rows from the store, observes each container through the
// backend, and does the next step: start a missing container, stop one that
// is leaving (SIGTERM, then SIGKILL after the grace period), rewrite the
// cluster's hosts and hostfile, record phases. It is idempotent: running it
// again with nothing changed does nothing. A pass that is waiting (a
// container still starting or stopping) asks to be run again shortly; an
// error requeues with exponential backoff, reset by the next success. A
// container that fails to start fails its create (the whole cluster is
// removed, status Failed with the reason) or its scale (the new containers
// are removed, the cluster keeps running at its former size) — recorded,
// not retried.
//
// One worker thread runs passes; enqueue() may be called from any thread.
// Every cluster is also re-queued periodically, so a container that dies is
// noticed without anyone asking.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "control/backends/backend.h"
#include "control/store/store.h"

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
};

// The environment of a container: `base` (edt's PATH, PYTHONPATH), then
// edt's own variables, CUDA_VISIBLE_DEVICES, the framework's (Megatron:
// MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK), then the spec's env.
std::map<std::string, std::string> container_env(const ClusterSpec& spec, const ContainerStatus& container,
                                                 const std::map<std::string, std::string>& base);

struct ReconcilerStats {
  uint64_t passes = 0;
  uint64_t errors = 0;
  double seconds = 0;  // total time spent in passes
};

class Reconciler {
 public:
  Reconciler(ControlStore* store, Backend* backend, ReconcilerOptions options);
  ~Reconciler();

  void start();
  void stop();
  void enqueue(const std::string& cluster);

  // One pass for one cluster. Returns true when nothing is left to wait for.
  Result<bool> reconcile(const std::string& cluster);

  ReconcilerStats stats();

 private:
  void run();
  void schedule(const std::string& cluster, std::chrono::steady_clock::time_point when);
  SandboxSpec sandbox_spec(const Cluster& cluster, const ContainerRecord& record, const Catalog& catalog);
  ClusterFiles cluster_files(const std::vector<ContainerRecord>& records);
  // A container failed to start: undo the create or the scale that made it.
  Status fail_start(const Cluster& cluster, const std::vector<ContainerRecord>& records, const std::string& reason);

  ControlStore* store_;
  Backend* backend_;
  ReconcilerOptions options_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::chrono::steady_clock::time_point> due_;  // guarded by mu_
  std::map<std::string, int> failures_;                                // guarded by mu_
  bool stopping_ = false;                                              // guarded by mu_
  ReconcilerStats stats_;                                              // guarded by mu_
  std::thread worker_;
};

}  // namespace edt::control
