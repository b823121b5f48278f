// The driver of an elastic edtrun job (--min-np, --max-np,
// --host-discovery-script or --elastic): a policy over the Supervisor
// (supervisor.h) that reacts to host changes and worker exits.
//
// It hosts the job's TCP store and a MembershipCoordinator
// (src/elastic/membership.h) on it, and keeps one worker process per slot
// the job should use:
//   - Hosts come from a HostSource (host_source.h): -H, a watched hostfile
//     or a discovery script.
//   - The job uses min(max_np, free slots) workers, filling hosts in the
//     order they first appeared (older hosts keep the lower ranks). Hosts
//     added get workers; a host removed has its workers leave gracefully
//     (they finish up to their next commit; SIGTERM after the grace period).
//   - A worker that exits non-zero, is killed, or stops heartbeating (a
//     silent host) is a failure: its host is blacklisted (blacklist.h: for
//     good, or for an exponential cooldown between the
//     --blacklist-cooldown-range bounds) and the survivors form the next
//     generation without it.
//   - The job ends: with 0 once a worker finished (returned from run(),
//     which the store records as the job's completion, or exited with 0)
//     and the others have exited (newcomers that never joined end at once:
//     nothing is trained again); with 1 and a message when it stayed below
//     --min-np for --elastic-timeout, when --reset-limit was passed, when
//     every host is blacklisted, or when every worker failed; with 128 + the
//     signal when edtrun is interrupted. Nothing it started outlives it.
//
// Workers get EDT_COORDINATOR, EDT_WORKER_ID, EDT_HOSTNAME, EDT_ELASTIC=1 and
// EDT_ELASTIC_TIMEOUT (how long one waits for its generation: --elastic-
// timeout, at least 30 s, while the others of it start); their rank and size come from the generation they
// join (edt::elastic::State), not from the environment. As from Horovod's
// elastic driver, they also get HOROVOD_ELASTIC=1 and HOROVOD_HOSTNAME,
// HOROVOD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, _CROSS_RANK, _CROSS_SIZE of
// their start placement: their slot's place among the slots the job wanted
// when it was started (scripts key on this start rank). Output lines are
// prefixed with the worker's number ([3] for worker w3), which, unlike the
// rank, stays the same for the life of the process.
//
// run() must be called from the main thread before any other thread exists
// (see supervisor.h).
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "launcher/blacklist.h"
#include "launcher/host_source.h"
#include "launcher/job_options.h"

namespace edt::launcher {

struct ElasticDriverOptions {
  JobOptions base;  // command, ssh, grace period, exports, ... (base.hosts and np are not used)
  int min_np = 1;
  int max_np = 1 << 30;
  std::chrono::milliseconds elastic_timeout{600000};
  int reset_limit = -1;  // -1: no limit
  std::optional<Blacklist::CooldownRange> blacklist_cooldown;
  std::chrono::milliseconds heartbeat_timeout{6000};
};

class ElasticDriver {
 public:
  ElasticDriver(ElasticDriverOptions options, std::unique_ptr<HostSource> hosts);
  ~ElasticDriver();

  // Runs the job to its end; the value is edtrun's exit code.
  Result<int> run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edt::launcher
