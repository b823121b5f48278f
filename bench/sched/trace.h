// A job trace for the scheduling simulator: what arrives when, how many
// GPUs it asks, how long it runs at that size, and whether it is elastic.
//
// generate() makes one in the shape of Microsoft's Philly trace (Jeon et
// al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training
// Workloads", ATC'19) and SenseTime's Helios (Hu et al., SC'21): most jobs
// ask 1 GPU, a few ask 8 or more; run times are heavy-tailed (log-normal,
// median 30 minutes, mean about 2.5 hours, capped at 5 days); arrivals come
// at the mean rate that offers the cluster `load` of its GPU-hours.
//
// The arrival process (`arrivals`):
//   diurnal  (the default) a Poisson process whose rate follows Helios's
//            day: kHeliosHourlySubmissions in trace.cc, the hourly average
//            GPU job submissions of Helios's four clusters together over
//            six months (Hu et al., the paper's diurnal figure, panel (b),
//            "hourly average GPU job submission rates"; read off the plot
//            that the authors' artifact, S-Lab-System-Group/HeliosArtifact,
//            analysis/2_cluster characterization, draws, to about 5 jobs an
//            hour). Fewest at 7:00 (0.50 of the day's mean rate), most at
//            16:00 (1.51): 3.0 from trough to peak. The trace starts at
//            midnight; over whole days the mean rate, hence the load, is
//            the Poisson one's.
//   poisson  a constant rate: the runs of RESULTS.md before 2026-12-06.
// Not modelled, for want of a published figure to take them from: a
// weekly cycle (we found none in either paper; Helios's gives months),
// bursts within an hour (sweeps submitted together), and Philly's day (we
// found no arrival-time figure in Jeon et al.). Within an hour, arrivals
// are Poisson.
//
// A guess, not from the traces: the share of elastic jobs (half, `--elastic`;
// no trace records which jobs could have run elastic).
//
// The numbers come from a fixed seed through a generator of our own (not
// <random>'s distributions, whose output differs between standard
// libraries), so the same seed makes the same trace everywhere; both arrival
// processes draw the same numbers, so their traces hold the same jobs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "edt/status.h"

namespace edt::bench::sched {

struct Job {
  int id = 0;
  double arrival_s = 0;
  int gpus = 1;                // as asked: the size its duration is for
  int gpus_per_container = 1;  // min(gpus, 8): a container is one machine's share
  double duration_s = 0;       // at `gpus`
  bool elastic = false;        // may run on min..max containers (TraceOptions)
  int team = 0;

  int containers() const { return gpus / gpus_per_container; }
};

enum class Arrivals { kPoisson, kDiurnal };

struct TraceOptions {
  uint64_t seed = 1;
  int cluster_gpus = 64;
  int jobs = 2000;
  double load = 0.9;              // offered GPU-time over the cluster's GPU-time
  double elastic_fraction = 0.5;  // of jobs
  int teams = 4;
  Arrivals arrivals = Arrivals::kDiurnal;
};

std::vector<Job> generate(const TraceOptions& options);

// CSV: "id,arrival_s,gpus,gpus_per_container,duration_s,elastic,team".
Status write_trace(const std::string& path, const std::vector<Job>& jobs);
Result<std::vector<Job>> read_trace(const std::string& path);

}  // namespace edt::bench::sched
