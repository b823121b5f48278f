// The scheduling simulator: replays a trace (trace.h) on a cluster of
// `gpus` GPUs of one model under one policy, event by event, and measures
// what users wait for.
//
// The job model:
//   - A job of `gpus` GPUs for `duration_s` does that much work. On n GPUs
//     it works at speed (n / gpus)^beta, beta = log2(scaling): each
//     doubling of GPUs makes it `scaling` times faster (default 1.8, i.e.
//     90% scaling efficiency per doubling).
//   - An elastic job runs on min..max containers: min = half its asked
//     containers (at least 1), max = 4 times them (at most 64 GPUs).
//     A non-elastic job runs on exactly its asked containers.
//   - Growing costs the job `grow_pause_s` of no progress (new workers
//     start and join at the next commit). Shrinking costs it nothing (the
//     leaving workers drain at the next commit, survivors keep going), but
//     the drained GPUs are free only `drain_s` later.
//
// The policies:
//   fifo    the queue in arrival order, each job at its asked size; the
//           first that does not fit blocks those behind it.
//   static  Volcano-style gang scheduling: any queued job whose min fits
//           starts (arrival order), on as many containers up to its max as
//           fit then, and keeps that size to the end.
//   edt     edt::sched::decide() (src/sched/policy.h) after every event,
//           with each job's attained service (GPU-seconds held): elastic
//           growth into idle GPUs, reclaim by draining, growth moved from
//           jobs that ran long to jobs that ran little.
#pragma once

#include <string>
#include <vector>

#include "edt/status.h"
#include "sched/policy.h"
#include "trace.h"

namespace edt::bench::sched {

enum class PolicyKind { kFifo, kStatic, kEdt };
const char* policy_name(PolicyKind kind);

struct SimOptions {
  int gpus = 64;
  PolicyKind policy = PolicyKind::kEdt;
  int teams = 1;             // edt: teams of equal guarantees, no borrow limit
  double guaranteed = 1.0;   // edt: the share of the GPUs the teams' guarantees add up to
  double scaling = 1.8;      // speed-up per doubling of GPUs
  double grow_pause_s = 30;  // a job's lost time per growth
  double drain_s = 10;       // shrunk containers' GPUs free after this
  // edt: Snapshot::backfill_window_ms, in hours
  double backfill_window_h = edt::sched::kDefaultBackfillWindowMs / 3.6e6;
  // edt: Snapshot::service_quantum_gpu_s, in GPU-hours (0: no service levels)
  double service_quantum_gpu_h = edt::sched::kDefaultServiceQuantumGpuS / 3600.0;
  bool check = false;        // check the policy's invariants at every step
};

struct SimResult {
  int jobs = 0;
  double mean_jct_s = 0;
  double p99_jct_s = 0;
  double mean_queue_s = 0;
  double mean_jct_elastic_s = 0;  // over the elastic jobs only
  double mean_jct_rigid_s = 0;    // over the non-elastic jobs only
  double utilization_queued = 0;  // GPUs held by jobs / GPUs, while a job waits
  double utilization = 0;         // over the whole run
  double makespan_s = 0;
  long resizes = 0;
  long decisions = 0;             // edt: decide() calls
};

// The mean job completion time if every job ran from its arrival at its max
// size, without a pause: a bound no policy beats under these models (a
// non-elastic job's run time is its duration, whatever the policy).
double ideal_mean_jct_s(const std::vector<Job>& trace, const SimOptions& options);

// Fails only with --check, at the first broken invariant.
Result<SimResult> simulate(const std::vector<Job>& trace, const SimOptions& options);

}  // namespace edt::bench::sched
