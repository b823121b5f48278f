#include "launcher/elastic_driver.h"

#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/net.h"
#include "elastic/membership.h"

namespace edt::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often the loop wakes up at the latest; bounds how late a deadline or
// a coordinator decision can be.
constexpr milliseconds kTick{10};
// A hostfile is also re-read this often, in case inotify missed a change
// (a file system without it, a bind mount replaced from outside).
constexpr milliseconds kHostfilePoll{1000};
// A discovery script that runs longer than this is killed; the host list
// stays as it was.
constexpr milliseconds kDiscoveryTimeout{10000};

std::string seconds_text(milliseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(d.count()) / 1000.0);
  return text;
}

std::vector<std::string> env_entries(const Environment& env) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  return entries;
}

}  // namespace

Result<std::vector<HostSlots>> parse_discovered_hosts(const std::string& text, int slots_per_host) {
  // A bare host gets slots_per_host; everything else is hostfile syntax.
  std::ostringstream normalised;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string body = line.substr(0, line.find('#'));
    body.erase(0, body.find_first_not_of(" \t\r"));
    body.erase(body.find_last_not_of(" \t\r") + 1);
    const bool bare = !body.empty() && body.find(':') == std::string::npos && body.find(' ') == std::string::npos;
    normalised << body << (bare ? ":" + std::to_string(slots_per_host) : "") << "\n";
  }
  return parse_hostfile(normalised.str(), "the host discovery script's output");
}

struct ElasticDriver::Impl {
  struct Worker {
    std::string id;  // "w<serial>"
    int serial = 0;
    std::string host;
    int slot = 0;
    bool remote = false;
    std::unique_ptr<Process> process;
    Clock::time_point started_at;
    bool leaving = false;                          // host removed: leaves gracefully
    std::optional<Clock::time_point> term_at;      // SIGTERM then
    std::optional<Clock::time_point> kill_at;      // SIGKILL then
    std::string marker_buffer;                     // remote: stdout before the start marker
    bool marker_seen = false;
  };
  struct Blacklisted {
    int failures = 0;
    bool active = false;
    std::optional<Clock::time_point> until;  // when active: nullopt means for good
  };

  ElasticDriverOptions options;
  std::unique_ptr<TcpStoreServer> store;
  std::unique_ptr<elastic::MembershipCoordinator> coordinator;
  std::unique_ptr<OutputSink> output;
  std::map<std::string, std::unique_ptr<Worker>> workers;  // running or stopping
  std::vector<HostSlots> hosts;                             // as last read
  std::map<std::string, int64_t> host_order;                // first appearance
  std::map<std::string, Blacklisted> blacklist;
  std::vector<std::string> failures;                        // every worker failure, for the final message
  int next_serial = 0;
  int signal_fd = -1;
  int inotify_fd = -1;
  Clock::time_point next_host_read;
  std::optional<Clock::time_point> below_min_since;
  bool finishing = false;  // a worker finished: no more changes
  bool stopping = false;
  int exit_code = 0;

  void log(const std::string& message) const {
    std::string line = "edtrun: " + message + "\n";
    (void)!write(2, line.data(), line.size());
  }
  void debug(const std::string& message) const {
    if (options.base.verbose) log(message);
  }

  // --- hosts ---------------------------------------------------------------

  Result<std::vector<HostSlots>> read_hosts() {
    if (!options.hostfile.empty()) return read_hostfile(options.hostfile);
    if (!options.discovery_script.empty()) return run_discovery();
    return options.base.hosts;
  }

  Result<std::vector<HostSlots>> run_discovery() {
    SpawnOptions spawn;
    spawn.argv = {"/bin/sh", "-c", options.discovery_script};
    spawn.env = env_entries(options.base.launcher_env);
    EDT_ASSIGN_OR_RETURN(auto process, Process::spawn(spawn));
    std::string out, err;
    const auto deadline = Clock::now() + kDiscoveryTimeout;
    for (;;) {
      pollfd fds[2] = {{process->stdout_fd(), POLLIN, 0}, {process->stderr_fd(), POLLIN, 0}};
      poll(fds, 2, 10);
      char buffer[4096];
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0) continue;
        ssize_t n;
        while ((n = read(fds[i].fd, buffer, sizeof buffer)) > 0) (i == 0 ? out : err).append(buffer, size_t(n));
      }
      if (auto status = process->poll_exit()) {
        ssize_t n;
        while ((n = read(process->stdout_fd(), buffer, sizeof buffer)) > 0) out.append(buffer, size_t(n));
        if (!status->success())
          return unavailable("host discovery script '" + options.discovery_script + "' " + status->describe() +
                             (err.empty() ? "" : ": " + err));
        return parse_discovered_hosts(out, options.slots_per_host);
      }
      if (Clock::now() > deadline)
        return timeout_error("host discovery script '" + options.discovery_script + "' ran longer than " +
                             seconds_text(kDiscoveryTimeout));  // ~Process kills it
    }
  }

  Status watch_hostfile() {
    if (options.hostfile.empty()) return Status::ok();
    inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd < 0) return Status::ok();  // polling only
    std::filesystem::path dir = std::filesystem::absolute(options.hostfile).parent_path();
    if (inotify_add_watch(inotify_fd, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MODIFY) <
        0) {
      close(inotify_fd);
      inotify_fd = -1;
    }
    return Status::ok();
  }

  bool drain_inotify() {
    bool changed = false;
    alignas(inotify_event) char buffer[4096];
    const std::string name = std::filesystem::path(options.hostfile).filename().string();
    ssize_t n;
    while ((n = read(inotify_fd, buffer, sizeof buffer)) > 0) {
      for (char* p = buffer; p < buffer + n;) {
        auto* event = reinterpret_cast<inotify_event*>(p);
        if (event->len > 0 && name == event->name) changed = true;
        p += sizeof(inotify_event) + event->len;
      }
    }
    return changed;
  }

  void refresh_hosts() {
    next_host_read = Clock::now() + (options.discovery_script.empty() ? kHostfilePoll : options.discovery_interval);
    auto read = read_hosts();
    if (!read.is_ok()) {
      log("keeping the previous host list: " + read.status().message());
      return;
    }
    if (read.value() != hosts) {
      if (!hosts.empty() || options.base.verbose) log("host list is now " + format_host_list(read.value()));
      hosts = std::move(read).value();
    }
    for (const auto& h : hosts) host_order.emplace(h.host, static_cast<int64_t>(host_order.size()));
  }

  bool blacklisted(const std::string& host) {
    auto it = blacklist.find(host);
    if (it == blacklist.end() || !it->second.active) return false;
    if (it->second.until && Clock::now() >= *it->second.until) {
      log("host " + host + " is back from its blacklist cooldown");
      it->second.active = false;  // the failure count stays, for the backoff
      return false;
    }
    return true;
  }

  void blacklist_host(const std::string& host) {
    Blacklisted& b = blacklist[host];
    ++b.failures;
    b.active = true;
    if (!options.blacklist_cooldown) {
      b.until.reset();
      log("host " + host + " is blacklisted");
      return;
    }
    auto [low, high] = *options.blacklist_cooldown;
    milliseconds cooldown = std::min(low * (int64_t{1} << std::min(b.failures - 1, 20)), high);
    b.until = Clock::now() + cooldown;
    log("host " + host + " is blacklisted for " + seconds_text(cooldown));
  }

  // The (host, slot) pairs that should run a worker: hosts in order of first
  // appearance, skipping blacklisted ones, up to max_np.
  std::vector<std::pair<std::string, int>> wanted_slots() {
    std::vector<HostSlots> ordered = hosts;
    std::stable_sort(ordered.begin(), ordered.end(),
                     [&](const auto& a, const auto& b) { return host_order[a.host] < host_order[b.host]; });
    std::vector<std::pair<std::string, int>> out;
    for (const auto& h : ordered) {
      if (blacklisted(h.host)) continue;
      for (int s = 0; s < h.slots && static_cast<int>(out.size()) < options.max_np; ++s) out.push_back({h.host, s});
    }
    return out;
  }

  // --- workers -------------------------------------------------------------

  Status start_worker(const std::string& host, int slot) {
    auto w = std::make_unique<Worker>();
    w->serial = next_serial++;
    w->id = "w" + std::to_string(w->serial);
    w->host = host;
    w->slot = slot;
    w->remote = !options.base.local.is_local(host);
    std::string here = "127.0.0.1";
    if (w->remote) {
      EDT_ASSIGN_OR_RETURN(here, address_toward(host));
    }
    Rendezvous r{net::format_host_port(here, store->port()), here, 0};
    SlotInfo placeholder{host, 0, 0, 1, 0, 1, 0, 1};
    WorkerEnvironmentInputs inputs{&options.base.launcher_env, &options.base.exports, w->remote};
    Environment env = worker_environment(placeholder, r, inputs);
    // Ranks come from the generation a worker joins, not from its start.
    for (const auto& [name, value] : placement_variables(placeholder, r)) env.erase(name);
    env["EDT_COORDINATOR"] = r.coordinator;
    env["EDT_HOSTNAME"] = host;
    env["EDT_WORKER_ID"] = w->id;
    env["EDT_ELASTIC"] = "1";
    env["EDT_ELASTIC_TIMEOUT"] = std::to_string(options.elastic_timeout.count()) + "ms";
    SpawnOptions spawn;
    if (w->remote) {
      spawn.argv = ssh_command(host, options.base.ssh,
                               remote_worker_script(options.base.cwd, env, options.base.command,
                                                    std::chrono::duration_cast<std::chrono::seconds>(
                                                        options.base.grace_period)));
      spawn.env = env_entries(options.base.launcher_env);
      spawn.stdin_pipe = true;
    } else {
      spawn.argv = options.base.command;
      spawn.env = env_entries(env);
      w->marker_seen = true;
    }
    EDT_ASSIGN_OR_RETURN(w->process, Process::spawn(spawn));
    w->started_at = Clock::now();
    coordinator->expect(w->id, host, host_order[host], slot);
    debug("started worker " + w->id + " on " + host + " (pid " + std::to_string(w->process->pid()) + ")");
    workers[w->id] = std::move(w);
    return Status::ok();
  }

  void stop_worker(Worker& w, const std::string& why, milliseconds wait) {
    if (w.term_at) return;
    debug("stopping worker " + w.id + " on " + w.host + ": " + why);
    w.term_at = Clock::now() + wait;
  }

  // Starts and retires workers so that the live ones match wanted_slots().
  void reconcile() {
    if (finishing || stopping) return;
    auto wanted = wanted_slots();
    std::set<std::pair<std::string, int>> want(wanted.begin(), wanted.end());
    std::set<std::pair<std::string, int>> have;
    for (auto& [id, w] : workers) {
      if (w->leaving || w->term_at) continue;
      if (!want.count({w->host, w->slot})) {
        w->leaving = true;
        coordinator->remove(id, "host " + w->host + " left the host list");
        // It leaves at its next commit; stop it if it does not.
        stop_worker(*w, "its host left the host list", options.base.grace_period);
        continue;
      }
      have.insert({w->host, w->slot});
    }
    for (const auto& s : wanted) {
      if (have.count(s)) continue;
      Status started = start_worker(s.first, s.second);
      if (!started.is_ok()) {
        log("cannot start a worker on " + s.first + ": " + started.message());
        blacklist_host(s.first);
        return;
      }
    }
  }

  void on_exit(Worker& w, const ExitStatus& status) {
    if (w.process->stdout_fd() >= 0) read_output(w, Stream::kStdout);
    if (w.process->stderr_fd() >= 0) read_output(w, Stream::kStderr);
    debug("worker " + w.id + " on " + w.host + " " + status.describe());
    if (stopping || w.leaving) {
      coordinator->lost(w.id, "stopped");
      return;
    }
    if (status.success()) {
      if (!finishing) {
        debug("worker " + w.id + " finished; the job ends when the others do");
        // Workers still waiting for a generation will not get one.
        (void)coordinator->shutdown("the job finished");
      }
      finishing = true;
      coordinator->lost(w.id, "finished");
      return;
    }
    const std::string what = "worker " + w.id + " on host " + w.host + " " + status.describe();
    failures.push_back(what);
    if (finishing) return;
    log(what + "; the others go on without it");
    coordinator->lost(w.id, status.describe() + " on host " + w.host);
    blacklist_host(w.host);
    // Its host is out: the other workers there would be asked to leave by
    // reconcile(); they are failures of the same host, so stop them now.
    for (auto& [id, other] : workers)
      if (other.get() != &w && other->host == w.host && !other->process->exit_status()) {
        other->leaving = true;
        coordinator->lost(id, "host " + w.host + " was blacklisted");
        stop_worker(*other, "its host was blacklisted", milliseconds(0));
      }
  }

  void read_output(Worker& w, Stream stream) {
    char buffer[65536];
    int fd = stream == Stream::kStdout ? w.process->stdout_fd() : w.process->stderr_fd();
    for (;;) {
      ssize_t n = read(fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) break;
      std::string_view bytes(buffer, size_t(n));
      if (stream == Stream::kStdout && !w.marker_seen) {
        w.marker_buffer.append(bytes);
        const std::string marker = std::string(kStartedMarker) + "\n";
        size_t at = w.marker_buffer.find(marker);
        if (at == std::string::npos) continue;
        w.marker_seen = true;
        std::string rest = w.marker_buffer.substr(0, at) + w.marker_buffer.substr(at + marker.size());
        w.marker_buffer.clear();
        if (!rest.empty()) output->write(w.serial, stream, rest);
        continue;
      }
      output->write(w.serial, stream, bytes);
    }
    if (stream == Stream::kStdout) {
      if (!w.marker_buffer.empty()) output->write(w.serial, stream, w.marker_buffer);
      w.process->close_stdout();
    } else {
      w.process->close_stderr();
    }
    output->close(w.serial, stream);
  }

  void signal_stops() {
    const auto now = Clock::now();
    for (auto& [id, w] : workers) {
      if (w->process->exit_status()) continue;
      if (w->term_at && now >= *w->term_at && !w->kill_at) {
        if (w->remote && w->marker_seen) {
          w->process->close_stdin();  // the remote wrapper stops the worker
        } else {
          w->process->signal_group(SIGTERM);
        }
        w->kill_at = now + options.base.grace_period + (w->remote ? milliseconds(2000) : milliseconds(0));
      }
      if (w->kill_at && now >= *w->kill_at) w->process->signal_group(SIGKILL);
    }
  }

  // A worker that has not registered within the start timeout failed to start.
  void check_start_timeouts() {
    const auto now = Clock::now();
    for (auto& [id, w] : workers) {
      if (w->term_at || w->process->exit_status() || coordinator->registered(id)) continue;
      if (now - w->started_at < options.base.start_timeout) continue;
      const std::string what = "worker " + id + " on host " + w->host + " did not start within the start timeout of " +
                               seconds_text(options.base.start_timeout);
      log(what);
      failures.push_back(what);
      w->leaving = true;
      coordinator->lost(id, "did not start");
      stop_worker(*w, "did not start", milliseconds(0));
      blacklist_host(w->host);
    }
  }

  // --- the job -------------------------------------------------------------

  void fail(const std::string& message) {
    if (stopping) return;
    log(message);
    exit_code = 1;
    stop_all(message);
  }

  void stop_all(const std::string& why) {
    if (stopping) return;
    stopping = true;
    (void)coordinator->shutdown(why);
    for (auto& [id, w] : workers) stop_worker(*w, why, milliseconds(0));
  }

  int live_slots() {
    int n = 0;
    for (const auto& h : hosts)
      if (!blacklisted(h.host)) n += h.slots;
    return std::min(n, options.max_np);
  }

  void check_job() {
    if (stopping || finishing) return;
    auto polled = coordinator->poll();
    if (!polled.is_ok()) {
      fail("the rendezvous store failed: " + polled.status().message());
      return;
    }
    for (const auto& id : polled->silent) {
      auto it = workers.find(id);
      if (it == workers.end()) continue;
      Worker& w = *it->second;
      const std::string what = "worker " + id + " on host " + w.host + " sent no heartbeat for " +
                               seconds_text(options.heartbeat_timeout);
      log(what + "; the others go on without it");
      failures.push_back(what);
      w.leaving = true;
      stop_worker(w, "silent", milliseconds(0));
      blacklist_host(w.host);
    }
    if (polled->published) {
      const auto& g = *polled->published;
      std::string who;
      for (const auto& m : g.members) who += (who.empty() ? "" : " ") + m.id + "@" + m.host;
      log("generation " + std::to_string(g.number) + ": " + std::to_string(g.members.size()) + " workers (" + who +
          ")" + (g.failure ? " after a failure: " + g.why : ""));
      const int64_t resets = g.number - 1;
      if (options.reset_limit >= 0 && resets > options.reset_limit) {
        fail("the job reached its reset limit (--reset-limit " + std::to_string(options.reset_limit) + ") after " +
             std::to_string(resets) + " resets; stopping");
        return;
      }
    }
    // Every host blacklisted for good: nothing can come back.
    bool any_hope = false;
    for (const auto& h : hosts) {
      auto it = blacklist.find(h.host);
      any_hope = any_hope || it == blacklist.end() || !it->second.active || it->second.until.has_value();
    }
    if (!hosts.empty() && !any_hope) {
      std::string list;
      for (const auto& f : failures) list += "\n  " + f;
      fail("every host is blacklisted after failures; the job cannot go on:" + list);
      return;
    }
    // Below the minimum: the workers that could run, or the coordinator says so.
    const bool below = live_slots() < options.min_np || polled->below_min;
    if (!below) {
      below_min_since.reset();
      return;
    }
    if (!below_min_since) below_min_since = Clock::now();
    if (Clock::now() - *below_min_since >= options.elastic_timeout) {
      fail("the job had " + std::to_string(live_slots()) + " usable slots (" + std::to_string(polled->ready) +
           " workers ready) but needs at least " + std::to_string(options.min_np) + " (--min-np) and waited " +
           seconds_text(options.elastic_timeout) + " (--elastic-timeout); stopping");
    }
  }

  void handle_signals() {
    signalfd_siginfo info;
    while (read(signal_fd, &info, sizeof info) == sizeof info) {
      int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) continue;
      if (stopping) {
        for (auto& [id, w] : workers) w->process->signal_group(SIGKILL);
        continue;
      }
      exit_code = 128 + sig;
      log("got signal " + std::to_string(sig) + " (" + strsignal(sig) + "); stopping every worker");
      stop_all("edtrun got signal " + std::to_string(sig));
    }
  }

  Result<int> run() {
    if (options.base.command.empty())
      return invalid_argument("no command given; put the program to run after the options");
    if (options.min_np < 1 || options.max_np < options.min_np)
      return invalid_argument("--min-np " + std::to_string(options.min_np) + " and --max-np " +
                              std::to_string(options.max_np) + ": need 1 <= min-np <= max-np");
    output = terminal_output();
    sigset_t signals;
    sigemptyset(&signals);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&signals, sig);
    sigprocmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);
    signal_fd = signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signal_fd < 0) return io_error("cannot make a signalfd", errno);
    EDT_ASSIGN_OR_RETURN(store, TcpStoreServer::start(TcpStoreServerOptions{}));
    elastic::CoordinatorOptions copts;
    copts.min_size = options.min_np;
    copts.max_size = options.max_np;
    copts.heartbeat_timeout = options.heartbeat_timeout;
    coordinator = std::make_unique<elastic::MembershipCoordinator>(
        std::make_shared<PrefixStore>("elastic", store->local_store()), copts);
    EDT_RETURN_IF_ERROR(watch_hostfile());
    {
      auto first = read_hosts();
      if (!first.is_ok()) return first.status();
      hosts = first.value();
      for (const auto& h : hosts) host_order.emplace(h.host, static_cast<int64_t>(host_order.size()));
      next_host_read = Clock::now() + (options.discovery_script.empty() ? kHostfilePoll : options.discovery_interval);
    }
    debug("elastic job: min-np " + std::to_string(options.min_np) + ", max-np " + std::to_string(options.max_np) +
          ", hosts " + format_host_list(hosts) + ", store port " + std::to_string(store->port()));
    for (;;) {
      std::vector<pollfd> fds = {{signal_fd, POLLIN, 0}};
      if (inotify_fd >= 0) fds.push_back({inotify_fd, POLLIN, 0});
      std::vector<std::pair<Worker*, Stream>> owners;
      for (auto& [id, w] : workers) watch_output(w.get(), *w->process, &fds, &owners);
      poll(fds.data(), fds.size(), static_cast<int>(kTick.count()));
      if (fds[0].revents) handle_signals();
      const size_t first_output = inotify_fd >= 0 ? 2 : 1;
      bool hosts_changed = inotify_fd >= 0 && fds[1].revents && drain_inotify();
      for (size_t i = first_output; i < fds.size(); ++i)
        if (fds[i].revents) read_output(*owners[i - first_output].first, owners[i - first_output].second);
      std::vector<std::string> gone;
      for (auto& [id, w] : workers) {
        if (!w->process->exit_status())
          if (auto status = w->process->poll_exit()) on_exit(*w, *status);
        if (w->process->exit_status() && w->process->stdout_fd() < 0 && w->process->stderr_fd() < 0)
          gone.push_back(id);
      }
      for (const auto& id : gone) workers.erase(id);
      if (!stopping && !finishing && (hosts_changed || Clock::now() >= next_host_read)) refresh_hosts();
      check_start_timeouts();
      check_job();
      reconcile();
      signal_stops();
      if ((stopping || finishing) && workers.empty()) break;
    }
    return exit_code;
  }
};

ElasticDriver::ElasticDriver(ElasticDriverOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

ElasticDriver::~ElasticDriver() {
  impl_->workers.clear();  // kills and reaps whatever still runs
  if (impl_->signal_fd >= 0) close(impl_->signal_fd);
  if (impl_->inotify_fd >= 0) close(impl_->inotify_fd);
}

Result<int> ElasticDriver::run() { return impl_->run(); }

}  // namespace edt::launcher
