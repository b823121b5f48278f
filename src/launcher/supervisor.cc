#include "launcher/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "common/log.h"
#include "launcher/warm_client.h"

namespace edt::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// Appends what still fits under the early-output bound.
void append_bounded(std::string& held, std::string_view bytes) {
  held.append(bytes.substr(0, Supervisor::kEarlyOutputLimit - std::min(Supervisor::kEarlyOutputLimit, held.size())));
}

}  // namespace

struct Supervisor::Worker {
  WorkerSpec spec;
  std::unique_ptr<Process> process;
  bool started = false;  // remote: once the marker arrived
  std::string early_stdout;
  std::string early_stderr;
  bool stop_asked = false;
  std::optional<Clock::time_point> term_at;  // stop: SIGTERM (or stdin closed) then
  std::optional<Clock::time_point> kill_at;  // SIGKILL then
  bool killed = false;
  std::optional<Clock::time_point> drain_until;  // set when it exited

  bool exited() const { return process->exit_status().has_value(); }
  bool output_open() const { return process->stdout_fd() >= 0 || process->stderr_fd() >= 0; }
};

Supervisor::Supervisor(SupervisorOptions options) : options_(std::move(options)) {}

Supervisor::~Supervisor() {
  workers_.clear();  // ~Process kills and reaps whatever still runs
  if (signal_fd_ >= 0) close(signal_fd_);
}

Result<std::unique_ptr<Supervisor>> Supervisor::create(SupervisorOptions options) {
  if (options.output == nullptr) return invalid_argument("the supervisor needs an output sink");
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&signals, sig);
  sigprocmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a closed terminal or ssh pipe is an error code, not death
  std::unique_ptr<Supervisor> supervisor(new Supervisor(std::move(options)));
  supervisor->signal_fd_ = signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
  if (supervisor->signal_fd_ < 0) return io_error("cannot make a signalfd", errno);
  return supervisor;
}

// Python workers go through edt-warm-run unless the job turned it off.
bool Supervisor::warm(const WorkerSpec& spec) const {
  return is_python_command(options_.command) && !warm_socket_path(spec.env).empty();
}

Result<pid_t> Supervisor::spawn(const WorkerSpec& spec) {
  auto worker = std::make_unique<Worker>();
  worker->spec = spec;
  SpawnOptions spawn;
  if (spec.remote) {
    // ssh itself runs with edtrun's environment; the worker's goes in the script.
    auto grace = std::chrono::duration_cast<std::chrono::seconds>(options_.grace_period);
    std::string script = remote_worker_script(options_.cwd, spec.env, options_.command, grace, warm(spec));
    spawn.env = env_entries(options_.launcher_env);
    spawn.stdin_pipe = true;
    auto client = warm(spec) ? warm_run_program() : std::nullopt;
    auto worker_variable = client ? warm_worker_variable(options_.command, spec.env, options_.cwd) : std::nullopt;
    if (worker_variable) {
      // In a platform cluster the warm interpreter forks it in the host's
      // container directly; elsewhere (it declines) ssh runs, and only then
      // does edt-warm-run ask ssh -G about host keys (settle_host_key_checking).
      spawn.argv = ssh_command(spec.host, options_.ssh, script, false);
      spawn.argv.insert(spawn.argv.begin(), {*client, "--on", spec.host, "--"});
      spawn.env.push_back(*worker_variable);
    } else {
      spawn.argv = ssh_command(spec.host, options_.ssh, script, host_keys_configured(spec.host, spawn.env));
    }
  } else {
    spawn.argv = options_.command;
    if (warm(spec)) {
      if (auto client = warm_run_program()) spawn.argv.insert(spawn.argv.begin(), *client);
    }
    spawn.env = env_entries(spec.env);
    spawn.own_session = true;
    worker->started = true;
  }
  EDT_ASSIGN_OR_RETURN(worker->process, Process::spawn(spawn));
  pid_t pid = worker->process->pid();
  workers_[spec.tag] = std::move(worker);
  return pid;
}

bool Supervisor::host_keys_configured(const std::string& host, const std::vector<std::string>& env) {
  auto checked = host_keys_configured_.find(host);
  if (checked == host_keys_configured_.end())
    checked = host_keys_configured_.emplace(host, host_key_checking_configured(host, options_.ssh, env)).first;
  return checked->second;
}

SupervisorEvents Supervisor::wait(std::chrono::milliseconds timeout, const std::vector<int>& extra_fds) {
  std::vector<pollfd> fds = {{signal_fd_, POLLIN, 0}};
  for (int fd : extra_fds) fds.push_back({fd, POLLIN, 0});
  std::vector<std::pair<Worker*, Stream>> owners;
  for (auto& [tag, w] : workers_) watch_output(w.get(), *w->process, &fds, &owners);
  poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));

  SupervisorEvents events;
  if (fds[0].revents != 0) read_signals(events);
  for (size_t i = 0; i < extra_fds.size(); ++i)
    if (fds[1 + i].revents != 0) events.ready_fds.push_back(extra_fds[i]);
  const size_t first_output = 1 + extra_fds.size();
  for (size_t i = first_output; i < fds.size(); ++i) {
    auto [worker, stream] = owners[i - first_output];
    if (fds[i].revents != 0) read_output(*worker, stream);
  }
  reap(events);
  forget_drained();
  escalate();
  return events;
}

void Supervisor::read_signals(SupervisorEvents& events) {
  signalfd_siginfo info;
  while (read(signal_fd_, &info, sizeof info) == sizeof info) {
    int sig = static_cast<int>(info.ssi_signo);
    if (sig != SIGCHLD) events.signals.push_back(sig);  // children are reaped after every wakeup
  }
}

void Supervisor::read_output(Worker& worker, Stream stream) {
  char buffer[65536];
  int fd = stream == Stream::kStdout ? worker.process->stdout_fd() : worker.process->stderr_fd();
  while (true) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) break;
    std::string_view bytes(buffer, static_cast<size_t>(n));
    if (stream == Stream::kStdout) {
      deliver_stdout(worker, bytes);
    } else if (!worker.started) {
      append_bounded(worker.early_stderr, bytes);
    } else {
      options_.output->write(worker.spec.tag, stream, bytes);
    }
  }
  end_stream(worker, stream);
}

// A remote worker's stdout starts with whatever the login shell printed, then
// the marker line; the marker is taken out, everything else is output.
void Supervisor::deliver_stdout(Worker& worker, std::string_view bytes) {
  OutputSink& output = *options_.output;
  const int tag = worker.spec.tag;
  if (worker.started) {
    output.write(tag, Stream::kStdout, bytes);
    return;
  }
  worker.early_stdout.append(bytes);
  const std::string marker = std::string(kStartedMarker) + "\n";
  size_t at = worker.early_stdout.find(marker);
  if (at == std::string::npos) {
    if (worker.early_stdout.size() > kEarlyOutputLimit) {
      output.write(tag, Stream::kStdout, worker.early_stdout);
      worker.early_stdout.clear();
    }
    return;
  }
  worker.started = true;
  log::debug("{}: started", worker.spec.name);
  std::string before = worker.early_stdout.substr(0, at);
  std::string after = worker.early_stdout.substr(at + marker.size());
  worker.early_stdout.clear();
  if (!before.empty()) output.write(tag, Stream::kStdout, before);
  if (!worker.early_stderr.empty()) output.write(tag, Stream::kStderr, worker.early_stderr);
  worker.early_stderr.clear();
  if (!after.empty()) output.write(tag, Stream::kStdout, after);
}

// End of the stream (or of its drain time): what is held goes out, and an
// unfinished last line with it. Early stderr stays held for WorkerExit.
void Supervisor::end_stream(Worker& worker, Stream stream) {
  const int tag = worker.spec.tag;
  if (stream == Stream::kStdout) {
    if (!worker.early_stdout.empty()) options_.output->write(tag, Stream::kStdout, worker.early_stdout);
    worker.early_stdout.clear();
    worker.process->close_stdout();
  } else {
    worker.process->close_stderr();
  }
  options_.output->close(tag, stream);
}

void Supervisor::reap(SupervisorEvents& events) {
  for (auto& [tag, w] : workers_) {
    if (w->exited()) continue;
    auto status = w->process->poll_exit();
    if (!status) continue;
    // What is left in the pipes first, so that the marker and the last
    // lines are seen before the exit is judged.
    if (w->process->stdout_fd() >= 0) read_output(*w, Stream::kStdout);
    if (w->process->stderr_fd() >= 0) read_output(*w, Stream::kStderr);
    w->drain_until = Clock::now() + kDrainTime;
    events.exits.push_back(WorkerExit{tag, *status, w->started, w->stop_asked, w->started ? "" : w->early_stderr});
  }
}

void Supervisor::forget_drained() {
  const auto now = Clock::now();
  std::erase_if(workers_, [&](auto& entry) {
    Worker& w = *entry.second;
    if (!w.exited()) return false;
    if (w.output_open() && now < *w.drain_until) return false;
    for (Stream s : {Stream::kStdout, Stream::kStderr}) {
      int fd = s == Stream::kStdout ? w.process->stdout_fd() : w.process->stderr_fd();
      if (fd >= 0) end_stream(w, s);
    }
    return true;
  });
}

void Supervisor::escalate() {
  const auto now = Clock::now();
  for (auto& [tag, w] : workers_) {
    if (w->exited()) continue;
    if (w->term_at && !w->kill_at && now >= *w->term_at) terminate(*w);
    if (w->kill_at && !w->killed && now >= *w->kill_at) {
      log::debug("{} did not stop within the grace period; killing it", w->spec.name);
      w->process->signal_group(SIGKILL);
      w->killed = true;
    }
  }
}

void Supervisor::terminate(Worker& worker) {
  if (worker.spec.remote && worker.started) {
    worker.process->close_stdin();  // the wrapper stops the worker and reports its status
  } else {
    worker.process->signal_group(SIGTERM);
  }
  worker.kill_at = Clock::now() + options_.grace_period + (worker.spec.remote ? kSshExtraGrace : std::chrono::milliseconds(0));
}

void Supervisor::stop(int tag, std::chrono::milliseconds delay) {
  Worker* w = find(tag);
  if (w == nullptr || w->exited() || w->stop_asked) return;
  w->stop_asked = true;
  w->term_at = Clock::now() + delay;
  if (delay.count() <= 0) terminate(*w);
}

void Supervisor::stop_all() {
  for (auto& [tag, w] : workers_) stop(tag);
}

void Supervisor::kill_all() {
  for (auto& [tag, w] : workers_) {
    if (w->exited()) continue;
    w->stop_asked = true;
    w->process->signal_group(SIGKILL);
    w->killed = true;
  }
}

Supervisor::Worker* Supervisor::find(int tag) const {
  auto it = workers_.find(tag);
  return it == workers_.end() ? nullptr : it->second.get();
}

bool Supervisor::contains(int tag) const { return find(tag) != nullptr; }

bool Supervisor::running(int tag) const {
  Worker* w = find(tag);
  return w != nullptr && !w->exited();
}

bool Supervisor::started(int tag) const {
  Worker* w = find(tag);
  return w != nullptr && w->started;
}

bool Supervisor::stopping(int tag) const {
  Worker* w = find(tag);
  return w != nullptr && w->stop_asked;
}

std::string Supervisor::early_stderr(int tag) const {
  Worker* w = find(tag);
  return w == nullptr ? std::string() : w->early_stderr;
}

int Supervisor::running_count() const {
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(), [](const auto& e) { return !e.second->exited(); }));
}

}  // namespace edt::launcher
