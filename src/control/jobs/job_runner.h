// JobRunner: commands run in a cluster's container on a user's behalf
// (POST /clusters/{name}/jobs), detached from edtd so they outlive it.
//
// Each job's output goes to jobs/<id>.log under the data dir, and its exit
// code to jobs/<id>.exit when it ends; refresh() reads that back into the
// store, so a job that ended while edtd was down is still reported right.
// Thread-safe (the store is; the rest is files).
#pragma once

#include <map>
#include <string>

#include "control/backends/backend.h"
#include "control/store/store.h"

namespace edt::control {

class JobRunner {
 public:
  JobRunner(ControlStore* store, Backend* backend, std::string data_dir, std::map<std::string, std::string> base_env);

  // Starts `command` in `container` (a Running container of `cluster`).
  Result<Job> start(const Cluster& cluster, const std::string& container, const std::string& command,
                    const std::string& owner);
  // Records the end of a job that has ended; returns the job as it is now.
  Job refresh(Job job);
  void refresh_running();
  std::string log_path(int64_t id) const;

 private:
  std::string exit_path(int64_t id) const;

  ControlStore* store_;
  Backend* backend_;
  std::string dir_;
  std::map<std::string, std::string> base_env_;
};

}  // namespace edt::control
