// edtrun's elastic flags (horovodrun's): the glue between edtrun_main.cc and
// ElasticDriver, kept apart so that the static launcher stays as it was.
//
//   --min-np A            fewest workers to train with (default: -np);
//                         also horovodrun's --min-num-proc
//   --max-np B            most workers (default: every slot of the hosts);
//                         also --max-num-proc
//   --host-discovery-script S   prints "host:slots" or "host" per line
//   --slots-per-host K    slots of a discovered host printed without them
//   --discovery-interval D      how often to run the script (default auto:
//                         20 times its last run, within 100ms and 1s)
//   --elastic-timeout D   how long the job may stay below --min-np (600s)
//   --reset-limit N       end the job after N resets
//   --blacklist-cooldown-range MIN MAX   blacklisted hosts come back after
//                         an exponential backoff between MIN and MAX seconds
//   --heartbeat-timeout D a worker silent this long is lost (default 6s)
//   --elastic             elastic mode with the defaults
// Any of --min-np, --max-np, --host-discovery-script or --elastic turns the
// elastic mode on.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "launcher/job_options.h"

namespace edt::launcher {

struct ElasticFlags {
  int min_np = 0;  // 0: not given
  int max_np = 0;
  std::string discovery_script;
  int slots_per_host = 1;
  std::string discovery_interval = "auto";
  std::string elastic_timeout = "600s";
  int reset_limit = -1;
  std::vector<double> blacklist_cooldown;  // empty or {min, max} seconds
  std::string heartbeat_timeout = "6s";
  bool elastic = false;

  bool enabled() const { return elastic || min_np > 0 || max_np > 0 || !discovery_script.empty(); }
};

void add_elastic_flags(CLI::App& app, ElasticFlags& flags);

// Runs the elastic job described by `base` (the options every job has),
// `hostfile` (watched if given) and `flags`; returns edtrun's exit code,
// having printed any error.
int run_elastic(JobOptions base, const std::string& hostfile, const ElasticFlags& flags);

}  // namespace edt::launcher
