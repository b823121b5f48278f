// ReconcileLoop: the generic half of a controller, apart from what it
// controls (controller-runtime's Controller, in small). It owns one worker
// thread and a WorkQueue (work_queue.h), and drives a Reconcilable, the
// domain half, one key at a time:
//
//   start     every key the domain lists is queued, then the thread starts.
//   pass      the thread takes the next due key and calls reconcile(key):
//             done forgets its backoff; a requeue_after queues it again
//             after that delay; an error re-queues it with exponential
//             backoff (reset by its next success).
//   resync    every resync period every key is queued again, so a change
//             whose enqueue was lost (or a container that died) is noticed
//             without anyone asking; after_resync() follows.
//   stats     passes, errors and the time spent in passes.
//
// The loop knows nothing of clusters or containers; the domain knows
// nothing of threads, queues or backoff. enqueue() and stats() may be
// called from any thread; the Reconcilable's methods run on the loop's
// thread only (keys() also on the thread that calls start()).
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "control/reconcile/work_queue.h"
#include "edt/status.h"

namespace edt::control {

// What a successful pass asks for: nothing (done until something changes)
// or another pass after a delay.
struct ReconcileResult {
  std::optional<std::chrono::milliseconds> requeue_after;
  bool done() const { return !requeue_after; }
};

struct ReconcileStats {
  uint64_t passes = 0;
  uint64_t errors = 0;
  double seconds = 0;  // total time spent in passes
};

// The domain half: what one pass over one key does.
class Reconcilable {
 public:
  virtual ~Reconcilable() = default;
  // One level-based, idempotent pass for `key`.
  virtual Result<ReconcileResult> reconcile(const std::string& key) = 0;
  // Every key there is: queued on start and at every resync.
  virtual std::vector<std::string> keys() = 0;
  // After each pass, with its outcome (OK or the pass's error), before the
  // next pass: where the domain repairs what a failed pass may have left.
  virtual void after_pass(const std::string& key, const Status& outcome) {
    (void)key;
    (void)outcome;
  }
  // After each resync has queued every key.
  virtual void after_resync() {}
};

struct ReconcileLoopOptions {
  std::chrono::milliseconds base_backoff{100};
  std::chrono::milliseconds max_backoff{30000};
  std::chrono::milliseconds resync{2000};
};

class ReconcileLoop {
 public:
  ReconcileLoop(Reconcilable* domain, ReconcileLoopOptions options);
  ~ReconcileLoop();

  // Queues every key and starts the worker thread.
  void start();
  // Stops taking keys and joins the thread (the pass under way finishes).
  void stop();
  void enqueue(const std::string& key);
  ReconcileStats stats();

 private:
  void run();
  void resync();
  // Counts one pass and queues its key again as its outcome asks.
  void settle(const std::string& key, const Result<ReconcileResult>& result, double seconds);

  Reconcilable* domain_;
  WorkQueue queue_;
  std::mutex mu_;
  ReconcileStats stats_;  // guarded by mu_
  std::thread worker_;
};

}  // namespace edt::control
