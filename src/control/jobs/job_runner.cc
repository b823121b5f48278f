#include "control/jobs/job_runner.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/process.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The exit code a job's wrapper wrote, or nullopt before it ended.
std::optional<int> read_exit_code(const std::string& path) {
  std::ifstream in(path);
  int code = -1;
  if (in >> code) return code;
  return std::nullopt;
}

}  // namespace

JobRunner::JobRunner(Database* db, Backend* backend, std::string data_dir, std::map<std::string, std::string> base_env)
    : db_(db), backend_(backend), dir_(data_dir + "/jobs"), base_env_(std::move(base_env)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
}

std::string JobRunner::log_path(int64_t id) const { return dir_ + "/" + std::to_string(id) + ".log"; }
std::string JobRunner::exit_path(int64_t id) const { return dir_ + "/" + std::to_string(id) + ".exit"; }

Outcome<Job> JobRunner::start(const Cluster& cluster, const std::vector<ContainerRecord>& records,
                              const std::string& container, const std::string& command, const std::string& owner) {
  auto target = std::find_if(records.begin(), records.end(), [&](auto& r) { return r.status.name == container; });
  if (target == records.end())
    return missing("container", "cluster " + cluster.spec.name + " has no container " + container, "check the name");
  if (target->status.phase != Phase::kRunning || target->status.leaving)
    return conflict("container",
                    "container " + container + " is " + to_string(target->status.phase) + ", not Running",
                    "wait, or change what it depends on");
  Job job;
  job.cluster = cluster.spec.name;
  job.container = container;
  job.owner = owner;
  job.command = command;
  job.created_at = unix_now();
  auto id = db_->lock().insert_job(job);
  if (!id.is_ok()) return error_from_status(id.status(), "container");
  job.id = *id;
  ExecSpec exec;
  exec.command = command;
  exec.log_path = log_path(job.id);
  exec.exit_path = exit_path(job.id);
  exec.env = container_env(cluster.spec, target->status, base_env_);
  std::ofstream(exec.log_path).flush();
  auto process = backend_->exec(target->sandbox, exec);
  if (!process.is_ok()) {
    job.state = JobState::kFailed;
    job.message = process.status().message();
    job.finished_at = unix_now();
  } else {
    job.process = *process;
  }
  if (Status st = db_->lock().update_job(job); !st.is_ok()) return error_from_status(st, "container");
  if (!process.is_ok()) return error_from_status(process.status(), "container");
  return job;
}

Job JobRunner::refresh(Job job) {
  if (job.state != JobState::kRunning) return job;
  auto code = read_exit_code(exit_path(job.id));
  // The exit file is written before the waiting shell exits; read it again
  // in case the job ended between the two looks.
  if (!code && !proc::alive(job.process)) {
    code = read_exit_code(exit_path(job.id));
    if (!code) {
      job.state = JobState::kFailed;
      job.message = "the job's process vanished without an exit code";
    }
  } else if (!code) {
    return job;
  }
  if (code) {
    job.exit_code = *code;
    job.state = *code == 0 ? JobState::kSucceeded : JobState::kFailed;
  }
  job.finished_at = unix_now();
  (void)db_->lock().update_job(job);
  return job;
}

std::optional<Job> JobRunner::current(int64_t id) {
  auto job = db_->lock().job(id);
  if (!job) return std::nullopt;
  return refresh(*job);
}

void JobRunner::refresh_running() {
  const std::vector<Job> running = db_->lock().jobs_running();
  for (const auto& job : running) refresh(job);
}

std::vector<Job> JobRunner::jobs_of(const std::string& cluster) {
  // Every job has its log under DATA_DIR/jobs, named by its id.
  std::vector<int64_t> ids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (entry.path().extension() != ".log") continue;
    const std::string stem = entry.path().stem().string();
    int64_t id = 0;
    auto [ptr, err] = std::from_chars(stem.data(), stem.data() + stem.size(), id);
    if (err == std::errc() && ptr == stem.data() + stem.size()) ids.push_back(id);
  }
  std::sort(ids.rbegin(), ids.rend());
  std::vector<Job> out;
  for (int64_t id : ids) {
    auto job = db_->lock().job(id);
    if (job && job->cluster == cluster) out.push_back(refresh(std::move(*job)));
  }
  return out;
}

}  // namespace edt::control
