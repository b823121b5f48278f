// What every edtrun job is given, static or elastic: the options edtrun
// parsed from its command line, checked. Plain data.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/hostfile.h"
#include "launcher/local_host.h"
#include "launcher/ssh.h"
#include "launcher/supervisor.h"
#include "launcher/worker_env.h"

namespace edt::launcher {

struct JobOptions {
  std::vector<HostSlots> hosts;
  std::string hosts_source = "the default localhost:N";  // for messages ("--hostfile h.txt")
  int np = 1;
  std::vector<std::string> command;
  SshOptions ssh;
  std::chrono::milliseconds start_timeout{30000};  // for every remote worker to answer
  std::chrono::milliseconds grace_period{5000};    // between SIGTERM and SIGKILL
  std::string output_dir;                          // empty: prefixed lines on the terminal
  bool prefix_timestamp = false;                   // terminal lines start with the time (-prefix-timestamp)
  Environment exports;       // -x
  Environment launcher_env;  // edtrun's environment
  std::string cwd;           // where workers start, on every host
  // --per-host: one worker per host (`hosts` then has 1 slot each); the
  // slots each host had, by position, for its GPUS_PER_NODE. Empty otherwise.
  std::vector<int> node_slots;
  LocalIdentity local = LocalIdentity::of_this_machine();
};

// The supervisor's options for a job's workers, their output to `output`.
SupervisorOptions supervisor_options(const JobOptions& job, OutputSink* output);

}  // namespace edt::launcher
