#include "control/jobs/job_runner.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "control/reconcile/reconciler.h"

namespace edt::control {

namespace {
int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

JobRunner::JobRunner(ControlStore* store, Backend* backend, std::string data_dir,
                     std::map<std::string, std::string> base_env)
    : store_(store), backend_(backend), dir_(data_dir + "/jobs"), base_env_(std::move(base_env)) {
  std::filesystem::create_directories(dir_);
}

std::string JobRunner::log_path(int64_t id) const { return dir_ + "/" + std::to_string(id) + ".log"; }
std::string JobRunner::exit_path(int64_t id) const { return dir_ + "/" + std::to_string(id) + ".exit"; }

Result<Job> JobRunner::start(const Cluster& cluster, const std::string& container, const std::string& command,
                             const std::string& owner) {
  const ContainerRecord* target = nullptr;
  auto records = store_->containers(cluster.spec.name);
  for (const auto& r : records)
    if (r.status.name == container) target = &r;
  if (!target) return not_found("cluster " + cluster.spec.name + " has no container " + container);
  if (target->status.phase != phase::kRunning || target->status.leaving)
    return failed_precondition("container " + container + " is " + target->status.phase + ", not Running");
  Job job;
  job.cluster = cluster.spec.name;
  job.container = container;
  job.owner = owner;
  job.command = command;
  job.created_at = unix_now();
  EDT_ASSIGN_OR_RETURN(job.id, store_->create_job(job));
  ExecSpec exec;
  exec.command = command;
  exec.log_path = log_path(job.id);
  exec.exit_path = exit_path(job.id);
  exec.env = container_env(cluster.spec, target->status, base_env_);
  std::ofstream(exec.log_path).flush();
  auto process = backend_->exec(target->sandbox, exec);
  if (!process.is_ok()) {
    job.state = job_state::kFailed;
    job.message = process.status().message();
    job.finished_at = unix_now();
  } else {
    job.process = *process;
  }
  EDT_RETURN_IF_ERROR(store_->update_job(job));
  if (!process.is_ok()) return process.status();
  return job;
}

Job JobRunner::refresh(Job job) {
  if (job.state != job_state::kRunning) return job;
  std::ifstream in(exit_path(job.id));
  int code = -1;
  if (in >> code) {
    job.exit_code = code;
    job.state = code == 0 ? job_state::kSucceeded : job_state::kFailed;
  } else if (!process_alive(job.process)) {
    // The exit file is written before the waiting shell exits; check again
    // in case it ended between the two reads.
    std::ifstream again(exit_path(job.id));
    if (again >> code) {
      job.exit_code = code;
      job.state = code == 0 ? job_state::kSucceeded : job_state::kFailed;
    } else {
      job.state = job_state::kFailed;
      job.message = "the job's process vanished without an exit code";
    }
  } else {
    return job;
  }
  job.finished_at = unix_now();
  (void)store_->update_job(job);
  return job;
}

void JobRunner::refresh_running() {
  for (auto& job : store_->jobs_running()) refresh(job);
}

}  // namespace edt::control
