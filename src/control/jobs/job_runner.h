// JobRunner: commands run in a cluster's container on a user's behalf
// (POST /clusters/{name}/jobs), detached from edtd so they outlive it.
//
// Each job's output goes to jobs/<id>.log under the data dir, and its exit
// code to jobs/<id>.exit when it ends; refresh() reads that back into the
// database, so a job that ended while edtd was down is still reported right.
// Thread-safe (the database is; the rest is files).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "control/backends/backend.h"
#include "control/db/database.h"
#include "control/model/error.h"
#include "control/model/job.h"

namespace edt::control {

class JobRunner {
 public:
  JobRunner(Database* db, Backend* backend, std::string data_dir, std::map<std::string, std::string> base_env);

  // Starts `command` in `container`, one of `records` (the containers of
  // `cluster`); refuses (field "container") one that is missing or not Running.
  Outcome<Job> start(const Cluster& cluster, const std::vector<ContainerRecord>& records, const std::string& container,
                     const std::string& command, const std::string& owner);
  // Records the end of a job that has ended; returns the job as it is now.
  Job refresh(Job job);
  // The job `id` as it is now (refreshed), or nullopt.
  std::optional<Job> current(int64_t id);
  void refresh_running();
  // The jobs of `cluster`, newest first, refreshed.
  std::vector<Job> jobs_of(const std::string& cluster);
  std::string log_path(int64_t id) const;

 private:
  std::string exit_path(int64_t id) const;

  Database* db_;
  Backend* backend_;
  std::string dir_;
  std::map<std::string, std::string> base_env_;
};

}  // namespace edt::control
