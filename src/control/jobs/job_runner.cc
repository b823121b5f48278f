#include "control/jobs/job_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/log.h"
#include "common/process.h"
#include "common/shell.h"
#include "common/units.h"
#include "control/model/container_files.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

// The exit code a job's wrapper wrote, or nullopt before it ended.
std::optional<int> read_exit_code(const std::string& path) {
  std::ifstream in(path);
  int code = -1;
  if (in >> code) return code;
  return std::nullopt;
}

// The job id a file under jobs/ belongs to ("<id>.<what>"), or nullopt.
std::optional<int64_t> id_of_file(const std::string& name) {
  int64_t id = 0;
  auto [ptr, err] = std::from_chars(name.data(), name.data() + name.size(), id);
  if (err != std::errc() || ptr == name.data() || ptr == name.data() + name.size() || *ptr != '.') return std::nullopt;
  return id;
}

// `command` run from `cwd` (when given): a cd that fails ends the job
// with bash's own message in its log, and the command is never run elsewhere.
std::string in_directory(const std::string& cwd, const std::string& command) {
  if (cwd.empty()) return command;
  return "cd -- " + shell_quote(cwd) + " || exit\n" + command;
}

// The image `name`, or an empty one (no Env, no WorkingDir) if it went.
Image image_named(Database& db, const std::string& name) {
  for (auto& image : db.lock().images())
    if (image.name == name) return image;
  return {};
}

}  // namespace

JobRunner::JobRunner(Database* db, Backend* backend, std::string data_dir, std::map<std::string, std::string> base_env,
                     JobLogOptions log)
    : db_(db), backend_(backend), dir_(data_dir + "/jobs"), base_env_(std::move(base_env)), log_(std::move(log)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  // Made 0755 by earlier edtds: a job's output is its owner's alone.
  ::chmod(dir_.c_str(), 0700);
  for (const auto& entry : fs::directory_iterator(dir_, ec)) ::chmod(entry.path().c_str(), 0600);
  if (log_.program.empty()) log_.program = fs::read_symlink("/proc/self/exe", ec).string();
  sweep();
}

std::string JobRunner::log_path(int64_t id) const { return dir_ + "/" + std::to_string(id) + ".log"; }
std::string JobRunner::exit_path(int64_t id) const { return dir_ + "/" + std::to_string(id) + ".exit"; }
std::string JobRunner::code_path(int64_t id) const { return dir_ + "/" + std::to_string(id) + ".code"; }
std::string JobRunner::fifo_path(int64_t id) const { return dir_ + "/" + std::to_string(id) + ".pipe"; }

Status JobRunner::prepare_log(int64_t id, ExecSpec& exec) {
  const int log = ::open(log_path(id).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (log < 0) return io_error("create " + log_path(id), errno);
  ::close(log);
  if (::mkfifo(fifo_path(id).c_str(), 0600) != 0) return io_error("mkfifo " + fifo_path(id), errno);
  exec.log_path = fifo_path(id);
  exec.exit_path = code_path(id);
  return Status::ok();
}

Result<proc::ProcessId> JobRunner::start_log(int64_t id, const SandboxRef& wrapper) {
  auto relay = start_job_log(log_.program, {fifo_path(id), log_path(id), code_path(id), exit_path(id)}, log_.limit);
  if (relay.is_ok()) return relay;
  // The wrapper waits to open the FIFO: it goes, and its end is let go.
  if (proc::alive(wrapper)) ::kill(static_cast<pid_t>(wrapper.pid), SIGKILL);
  if (int fd = ::open(fifo_path(id).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC); fd >= 0) ::close(fd);
  return relay.status().with_context("start job " + std::to_string(id) + "'s log writer");
}

Result<Job> JobRunner::start(const Cluster& cluster, const std::vector<ContainerRecord>& records,
                              const JobStart& start) {
  const std::string& container = start.container;
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
  job.owner = start.owner;
  job.command = start.command;
  job.created_at = unix_seconds();
  auto id = db_->lock().insert_job(job);
  if (!id.is_ok()) return as_refusal(id.status(), "container");
  job.id = *id;
  ExecSpec exec;
  exec.container = container;
  // The image's WorkingDir, unless the job names its own; its Env (catalog.h).
  const Image image = image_named(*db_, cluster.spec.image);
  exec.command = in_directory(start.cwd.empty() ? image.working_dir : start.cwd, start.command);
  exec.env = container_env(cluster.spec, target->status, image_base_env(image, base_env_));
  // The job is known by its log's writer, which ends after it (job_log.h).
  Result<SandboxRef> process = [&]() -> Result<SandboxRef> {
    EDT_RETURN_IF_ERROR(prepare_log(job.id, exec));
    EDT_ASSIGN_OR_RETURN(SandboxRef wrapper, backend_->exec(target->sandbox, exec));
    return start_log(job.id, wrapper);
  }();
  if (!process.is_ok()) {
    job.state = JobState::kFailed;
    job.message = process.status().message();
    job.finished_at = unix_seconds();
    ::unlink(fifo_path(job.id).c_str());
  } else {
    job.process = *process;
  }
  if (Status st = db_->lock().update_job(job); !st.is_ok()) return as_refusal(st, "container");
  if (!process.is_ok()) return as_refusal(process.status(), "container");
  return job;
}

Job JobRunner::refresh(Job job) {
  if (job.state != JobState::kRunning) return job;
  auto code = read_exit_code(exit_path(job.id));
  // The exit file is written before the waiting shell exits; read it again
  // in case the job ended between the two looks.
  if (!code && !proc::alive(job.process)) {
    code = read_exit_code(exit_path(job.id));
    // A log writer that was killed leaves the wrapper's code where it was.
    if (!code) code = read_exit_code(code_path(job.id));
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
  job.finished_at = unix_seconds();
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
  sweep();
}

std::vector<Job> JobRunner::jobs_of(const std::string& cluster) {
  std::vector<Job> out = db_->lock().jobs_of(cluster);
  for (auto& job : out) job = refresh(std::move(job));
  return out;
}

Result<Job> JobRunner::remove(const Job& job) {
  const Job now = refresh(job);
  if (now.state == JobState::kRunning)
    return conflict("id", "job " + std::to_string(job.id) + " is still running",
                    "wait for it to end (GET /jobs/" + std::to_string(job.id) +
                        "), or delete its cluster, which ends it");
  if (Status st = db_->lock().delete_job(job.id); !st.is_ok()) return as_refusal(st, "id");
  remove_files(job.id);
  return now;
}

void JobRunner::remove_files(int64_t id) {
  for (const std::string& path : {log_path(id), exit_path(id), code_path(id), code_path(id) + ".tmp", fifo_path(id)})
    ::unlink(path.c_str());
}

int JobRunner::sweep() {
  // The files first, then the rows: a job's row is written before its files.
  std::set<int64_t> with_files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec))
    if (auto id = id_of_file(entry.path().filename().string())) with_files.insert(*id);
  if (with_files.empty()) return 0;
  std::set<int64_t> known;
  {
    auto tx = db_->lock();
    if (Status st = tx.delete_orphan_jobs(); !st.is_ok()) log::warn("jobs of deleted clusters: {}", st.message());
    known = tx.job_ids();
  }
  int removed = 0;
  for (int64_t id : with_files) {
    if (known.count(id)) continue;
    remove_files(id);
    ++removed;
  }
  if (removed > 0) log::info("deleted the logs of {} jobs whose cluster or user is gone", removed);
  return removed;
}

}  // namespace edt::control
