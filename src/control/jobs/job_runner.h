// JobRunner: commands run in a cluster's container on a user's behalf
// (POST /clusters/{name}/jobs), detached from edtd so they outlive it.
//
// Each job's output goes to jobs/<id>.log under the data dir, through the
// bounded writer of job_log.h, and its exit code to jobs/<id>.exit when it
// ends; refresh() reads that back into the database, so a job that ended
// while edtd was down is still reported right. jobs/ is 0700 and its files
// 0600: a job's output is its owner's alone.
//
// A job goes with its row: remove() deletes an ended one; a cluster's or a
// user's jobs lose their rows with the cluster or the user (Database), and
// sweep() then deletes the files no row names.
// Thread-safe (the database is; the rest is files).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "control/backends/backend.h"
#include "control/db/database.h"
#include "control/jobs/job_log.h"
#include "control/model/error.h"
#include "control/model/job.h"

namespace edt::control {

struct JobLogOptions {
  std::string program;  // edtd, which runs `job-log`; empty: this program (/proc/self/exe)
  uint64_t limit = kDefaultJobLogLimit;
};

// What to start: `command` (bash -c) in `container`, from the directory
// `cwd` of the container (empty: its user's home), for `owner`.
struct JobStart {
  std::string container;
  std::string command;
  std::string cwd;
  std::string owner;
};

class JobRunner {
 public:
  JobRunner(Database* db, Backend* backend, std::string data_dir, std::map<std::string, std::string> base_env,
            JobLogOptions log = {});

  // Starts the job in its container, one of `records` (the containers of
  // `cluster`); refuses (field "container") one that is missing or not
  // Running. A cwd missing in the container fails the job (its log says so).
  Result<Job> start(const Cluster& cluster, const std::vector<ContainerRecord>& records, const JobStart& start);
  // Records the end of a job that has ended; returns the job as it is now.
  Job refresh(Job job);
  // The job `id` as it is now (refreshed), or nullopt.
  std::optional<Job> current(int64_t id);
  // Refreshes the running jobs and sweeps (below).
  void refresh_running();
  // The jobs of `cluster`, newest first, refreshed.
  std::vector<Job> jobs_of(const std::string& cluster);
  // Deletes an ended job's row and files; refuses (409, field "id") a
  // running one: it ends with its command, or with its cluster.
  Result<Job> remove(const Job& job);
  // Deletes the files under jobs/ of jobs that have no row (their cluster or
  // user was deleted); returns how many jobs' files went.
  int sweep();
  std::string log_path(int64_t id) const;

 private:
  std::string exit_path(int64_t id) const;
  std::string code_path(int64_t id) const;
  std::string fifo_path(int64_t id) const;
  // Makes job `id`'s log (0600) and the FIFO `exec` is to write into.
  Status prepare_log(int64_t id, ExecSpec& exec);
  // Starts the bounded writer of job `id`'s log, once `wrapper` (the job)
  // is started; if it cannot, the wrapper goes.
  Result<proc::ProcessId> start_log(int64_t id, const SandboxRef& wrapper);
  void remove_files(int64_t id);

  Database* db_;
  Backend* backend_;
  std::string dir_;
  std::map<std::string, std::string> base_env_;
  JobLogOptions log_;
};

}  // namespace edt::control
