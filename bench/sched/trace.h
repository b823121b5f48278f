// A job trace for the scheduling simulator: what arrives when, how many
// GPUs it asks, how long it runs at that size, and whether it is elastic.
//
// generate() makes one in the shape of Microsoft's Philly trace (Jeon et
// al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training
// Workloads", ATC'19) and SenseTime's Helios (Hu et al., SC'21): most jobs
// ask 1 GPU, a few ask 8 or more; run times are heavy-tailed (log-normal,
// median 30 minutes, mean about 2.5 hours, capped at 5 days); arrivals are
// Poisson at the rate that offers the cluster `load` of its GPU-hours. The
// numbers come from a fixed seed through a generator of our own (not
// <random>'s distributions, whose output differs between standard
// libraries), so the same seed makes the same trace everywhere.
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

struct TraceOptions {
  uint64_t seed = 1;
  int cluster_gpus = 64;
  int jobs = 2000;
  double load = 0.9;              // offered GPU-time over the cluster's GPU-time
  double elastic_fraction = 0.5;  // of jobs
  int teams = 4;
};

std::vector<Job> generate(const TraceOptions& options);

// CSV: "id,arrival_s,gpus,gpus_per_container,duration_s,elastic,team".
Status write_trace(const std::string& path, const std::vector<Job>& jobs);
Result<std::vector<Job>> read_trace(const std::string& path);

}  // namespace edt::bench::sched
