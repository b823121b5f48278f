// A job: a command run in a container of a cluster on a user's behalf,
// detached from edtd (see jobs/job_runner.h), and its JSON form.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "control/model/cluster.h"
#include "control/model/states.h"

namespace edt::control {

struct Job {
  int64_t id = 0;
  std::string cluster;
  std::string container;
  std::string owner;
  std::string command;
  JobState state = JobState::kRunning;
  int exit_code = -1;
  std::string message;
  SandboxRef process;  // the host-side wrapper that waits for the command
  int64_t created_at = 0;
  int64_t finished_at = 0;
};

nlohmann::json job_to_json(const Job& job);

}  // namespace edt::control
