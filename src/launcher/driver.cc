#include "launcher/driver.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "common/net.h"

namespace edt::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// Output kept from a remote worker before it started, for the error message
// if it never does.
constexpr size_t kEarlyOutputLimit = 64 * 1024;
// After the last worker exited, how long output still held by its pipes
// (a descendant in another session) may keep the job open.
constexpr std::chrono::milliseconds kDrainTime{2000};
// The remote wrapper itself waits the grace period before SIGKILL; ssh gets
// this long on top to report that before it is killed.
constexpr std::chrono::milliseconds kSshExtraGrace{2000};

Result<int> free_tcp_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return io_error("cannot make a socket to find a free port", errno);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  socklen_t length = sizeof address;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  int err = errno;
  close(fd);
  if (port < 0) return io_error("cannot find a free TCP port for MASTER_PORT", err);
  return port;
}

std::vector<std::string> env_entries(const Environment& env) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  return entries;
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

// Connecting a UDP socket sends nothing; it only picks the route.
Result<std::string> address_toward(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), "22", &hints, &found);
  if (rc != 0) {
    return unavailable("cannot resolve host '" + host + "': " + gai_strerror(rc) + "; check the host list and DNS");
  }
  std::string result;
  int err = 0;
  for (addrinfo* a = found; a != nullptr && result.empty(); a = a->ai_next) {
    int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* raw = local.ss_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                                                   : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, raw, text, sizeof text) != nullptr) result = text;
    } else {
      err = errno;
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (result.empty()) return io_error("no route from this machine to host '" + host + "'", err);
  return result;
}

// One slot of the job and the process that runs it.
struct Driver::Worker {
  SlotInfo slot;
  bool remote = false;
  std::unique_ptr<Process> process;
  // Remote workers count as started once the wrapper printed kStartedMarker.
  bool started = false;
  std::string early_stdout;  // remote: stdout before the marker
  std::string early_stderr;  // remote: stderr before the marker (ssh's own errors)
  bool stopped_by_us = false;

  std::string name() const { return "rank " + std::to_string(slot.rank) + " on host " + slot.host; }
};

Driver::Driver(DriverOptions options) : options_(std::move(options)) {}

Driver::~Driver() {
  workers_.clear();  // kills and reaps whatever still runs
  if (signal_fd_ >= 0) close(signal_fd_);
}

void Driver::log(const std::string& message) const {
  std::string line = "edtrun: " + message + "\n";
  (void)!write(2, line.data(), line.size());
}

Status Driver::validate_and_place() {
  if (options_.command.empty()) {
    return invalid_argument("no command given; put the program to run after the options, e.g. edtrun -np 2 python3 train.py");
  }
  EDT_ASSIGN_OR_RETURN(slots_, assign_slots(options_.hosts, options_.np, options_.hosts_source));
  return Status::ok();
}

Status Driver::start_rendezvous() {
  EDT_ASSIGN_OR_RETURN(store_, TcpStoreServer::start(TcpStoreServerOptions{}));
  bool rank0_local = options_.local.is_local(slots_.front().host);
  EDT_ASSIGN_OR_RETURN(int master_port, free_tcp_port());
  for (const auto& slot : slots_) {
    if (rendezvous_.count(slot.host)) continue;
    bool remote = !options_.local.is_local(slot.host);
    std::string here = "127.0.0.1";
    if (remote) {
      auto address = address_toward(slot.host);
      if (!address.is_ok()) return address.status();
      here = address.value();
    }
    Rendezvous r;
    r.coordinator = net::format_host_port(here, store_->port());
    r.master_addr = rank0_local ? here : slots_.front().host;
    r.master_port = master_port;
    rendezvous_[slot.host] = r;
  }
  if (options_.verbose) log("store listening on port " + std::to_string(store_->port()) + ", MASTER_PORT " + std::to_string(master_port));
  return Status::ok();
}

Status Driver::launch(Worker& worker) {
  const SlotInfo& slot = worker.slot;
  WorkerEnvironmentInputs inputs;
  inputs.launcher_env = &options_.launcher_env;
  inputs.exports = &options_.exports;
  inputs.remote = worker.remote;
  Environment env = worker_environment(slot, rendezvous_.at(slot.host), inputs);
  SpawnOptions spawn;
  if (worker.remote) {
    // ssh itself runs with edtrun's environment; the worker's goes in the script.
    std::string script = remote_worker_script(options_.cwd, env, options_.command,
                                              std::chrono::duration_cast<std::chrono::seconds>(options_.grace_period));
    spawn.argv = ssh_command(slot.host, options_.ssh, script);
    spawn.env = env_entries(options_.launcher_env);
    spawn.stdin_pipe = true;
  } else {
    spawn.argv = options_.command;
    spawn.env = env_entries(env);
    worker.started = true;
  }
  if (options_.verbose) {
    log(worker.name() + (worker.remote ? ": ssh " + slot.host : ": local") + ", EDT_COORDINATOR=" + env.at("EDT_COORDINATOR") +
        " MASTER_ADDR=" + env.at("MASTER_ADDR"));
  }
  auto process = Process::spawn(spawn);
  if (!process.is_ok()) return process.status().with_context("cannot start " + worker.name());
  worker.process = std::move(process).value();
  return Status::ok();
}

Result<int> Driver::run() {
  EDT_RETURN_IF_ERROR(validate_and_place());
  if (!options_.output_dir.empty()) {
    EDT_ASSIGN_OR_RETURN(output_, directory_output(options_.output_dir, options_.np));
  } else {
    output_ = terminal_output();
  }
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&signals, sig);
  sigprocmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a closed terminal or ssh pipe is an error code, not death
  signal_fd_ = signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) return io_error("cannot make a signalfd", errno);

  EDT_RETURN_IF_ERROR(start_rendezvous());
  for (const auto& slot : slots_) {
    auto worker = std::make_unique<Worker>();
    worker->slot = slot;
    worker->remote = !options_.local.is_local(slot.host);
    workers_.push_back(std::move(worker));
  }
  start_deadline_ = Clock::now() + options_.start_timeout;
  for (auto& worker : workers_) {
    Status launched = launch(*worker);
    if (!launched.is_ok()) {
      fail(launched.code() == StatusCode::kNotFound ? 127 : 1, launched.message());
      break;
    }
  }
  event_loop();
  return exit_code_;
}

bool Driver::any_running() const {
  return std::any_of(workers_.begin(), workers_.end(),
                     [](const auto& w) { return w->process && !w->process->exit_status(); });
}

void Driver::event_loop() {
  std::optional<Clock::time_point> drain_until;
  while (true) {
    if (!any_running()) {
      if (!drain_until) drain_until = Clock::now() + kDrainTime;
      bool open = std::any_of(workers_.begin(), workers_.end(), [](const auto& w) {
        return w->process && (w->process->stdout_fd() >= 0 || w->process->stderr_fd() >= 0);
      });
      if (!open || Clock::now() >= *drain_until) break;
    }
    std::vector<pollfd> fds = {{signal_fd_, POLLIN, 0}};
    std::vector<std::pair<Worker*, Stream>> owners = {{nullptr, Stream::kStdout}};
    for (auto& w : workers_)
      if (w->process) watch_output(w.get(), *w->process, &fds, &owners);
    // Deadlines are checked after every wakeup; 100 ms bounds how late.
    poll(fds.data(), fds.size(), 100);
    if (fds[0].revents != 0) handle_signals();
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_output(*owners[i].first, owners[i].second);
    }
    for (auto& w : workers_) {
      if (w->process && !w->process->exit_status()) {
        if (auto status = w->process->poll_exit()) on_exit(*w, *status);
      }
    }
    check_deadlines();
  }
}

void Driver::handle_signals() {
  signalfd_siginfo info;
  while (read(signal_fd_, &info, sizeof info) == sizeof info) {
    int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // the loop reaps after every wakeup
    if (stopping_) {
      log("got " + std::string(strsignal(sig)) + " again; killing every worker now");
      kill_all();
      continue;
    }
    if (!failed_) {
      failed_ = true;
      exit_code_ = 128 + sig;
    }
    stop_all("got signal " + std::to_string(sig) + " (" + strsignal(sig) + ")");
  }
}

void Driver::read_output(Worker& worker, Stream stream) {
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
      worker.early_stderr.append(bytes.substr(0, kEarlyOutputLimit - std::min(kEarlyOutputLimit, worker.early_stderr.size())));
    } else {
      output_->write(worker.slot.rank, stream, bytes);
    }
  }
  // End of the stream.
  if (stream == Stream::kStdout) {
    if (!worker.early_stdout.empty()) output_->write(worker.slot.rank, Stream::kStdout, worker.early_stdout);
    worker.early_stdout.clear();
    worker.process->close_stdout();
  } else {
    worker.process->close_stderr();
  }
  output_->close(worker.slot.rank, stream);
}

// A remote worker's stdout starts with whatever the login shell printed, then
// the marker line; the marker is taken out, everything else is output.
void Driver::deliver_stdout(Worker& worker, std::string_view bytes) {
  if (worker.started) {
    output_->write(worker.slot.rank, Stream::kStdout, bytes);
    return;
  }
  worker.early_stdout.append(bytes);
  std::string marker = std::string(kStartedMarker) + "\n";
  size_t at = worker.early_stdout.find(marker);
  if (at == std::string::npos) {
    if (worker.early_stdout.size() > kEarlyOutputLimit) {
      output_->write(worker.slot.rank, Stream::kStdout, worker.early_stdout);
      worker.early_stdout.clear();
    }
    return;
  }
  worker.started = true;
  if (options_.verbose) log(worker.name() + ": started");
  std::string before = worker.early_stdout.substr(0, at);
  std::string after = worker.early_stdout.substr(at + marker.size());
  worker.early_stdout.clear();
  if (!before.empty()) output_->write(worker.slot.rank, Stream::kStdout, before);
  if (!worker.early_stderr.empty()) output_->write(worker.slot.rank, Stream::kStderr, worker.early_stderr);
  worker.early_stderr.clear();
  if (!after.empty()) output_->write(worker.slot.rank, Stream::kStdout, after);
}

void Driver::on_exit(Worker& worker, const ExitStatus& status) {
  // Read what is left in the pipes first, so the marker and the last lines
  // are seen before the exit is judged.
  for (Stream s : {Stream::kStdout, Stream::kStderr}) {
    int fd = s == Stream::kStdout ? worker.process->stdout_fd() : worker.process->stderr_fd();
    if (fd >= 0) read_output(worker, s);
  }
  if (status.success() || worker.stopped_by_us || failed_) {
    if (options_.verbose) log(worker.name() + " " + status.describe());
    return;
  }
  if (worker.remote && !worker.started) {
    std::string ssh_error = trimmed(worker.early_stderr);
    if (status.code == 255) {
      fail(1, "cannot reach host " + worker.slot.host + " over ssh for rank " + std::to_string(worker.slot.rank) + ": " +
                  (ssh_error.empty() ? "ssh exited with code 255" : ssh_error) +
                  "; check that the host is up, runs sshd and accepts the key (-p/--ssh-port, -i/--ssh-identity-file)");
    } else {
      fail(status.shell_code(), worker.name() + " could not start: " +
                                    (ssh_error.empty() ? "the remote shell " + status.describe() : ssh_error));
    }
    return;
  }
  std::string hint;
  if (status.signal == 0 && status.code == 127) hint = " (127: a command was not found)";
  if (status.signal == 0 && status.code == 255 && worker.remote) hint = " (255: possibly the ssh connection failed)";
  fail(status.shell_code(), worker.name() + " " + status.describe() + hint);
}

void Driver::fail(int exit_code, const std::string& message) {
  if (failed_) return;
  failed_ = true;
  exit_code_ = exit_code;
  int others = 0;
  for (const auto& w : workers_) others += w->process && !w->process->exit_status() ? 1 : 0;
  if (others > 0) {
    log(message + "; stopping the other " + std::to_string(others) + (others == 1 ? " worker" : " workers"));
  } else {
    log(message);
  }
  stop_all("");
}

void Driver::stop_all(const std::string& reason) {
  if (stopping_) return;
  stopping_ = true;
  if (!reason.empty()) log(reason + "; stopping every worker");
  for (auto& w : workers_) {
    if (!w->process || w->process->exit_status()) continue;
    w->stopped_by_us = true;
    if (w->remote && w->started) {
      w->process->close_stdin();  // the wrapper stops the worker and reports its status
    } else {
      w->process->signal_group(SIGTERM);
    }
  }
  kill_deadline_ = Clock::now() + options_.grace_period;
  ssh_kill_deadline_ = kill_deadline_ + kSshExtraGrace;
}

void Driver::kill_all() {
  for (auto& w : workers_) {
    if (w->process) w->process->signal_group(SIGKILL);
  }
}

void Driver::check_deadlines() {
  auto now = Clock::now();
  if (stopping_) {
    for (auto& w : workers_) {
      if (!w->process || w->process->exit_status()) continue;
      if (now >= (w->remote ? ssh_kill_deadline_ : kill_deadline_)) {
        if (options_.verbose) log(w->name() + " did not stop within the grace period; killing it");
        w->process->signal_group(SIGKILL);
      }
    }
    return;
  }
  if (now < start_deadline_) return;
  for (auto& w : workers_) {
    if (!w->process || w->started || w->process->exit_status()) continue;
    std::string ssh_error = trimmed(w->early_stderr);
    auto seconds = std::chrono::duration_cast<std::chrono::milliseconds>(options_.start_timeout).count() / 1000.0;
    char when[32];
    std::snprintf(when, sizeof when, "%g s", seconds);
    fail(1, "host " + w->slot.host + " did not start rank " + std::to_string(w->slot.rank) + " within the start timeout of " +
                when + (ssh_error.empty() ? " (ssh printed nothing)" : " (ssh: " + ssh_error + ")") +
                "; check that the host is up and reachable by ssh, or raise --start-timeout");
    return;
  }
}

}  // namespace edt::launcher
