#include "launcher/elastic_driver.h"

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "common/log.h"
#include "common/net.h"
#include "edt/tcp_store.h"
#include "elastic/membership.h"
#include "launcher/host_table.h"
#include "launcher/placement.h"
#include "launcher/supervisor.h"

namespace edt::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often the loop wakes up at the latest; bounds how late a deadline or
// a coordinator decision can be.
constexpr milliseconds kTick{10};

std::string seconds_text(milliseconds d) { return fmt::format("{:g} s", static_cast<double>(d.count()) / 1000.0); }

std::string id_of(int serial) { return "w" + std::to_string(serial); }

// Where `slot` sits among the `wanted` slots, numbered as a static job of
// those slots would be: what Horovod's elastic driver tells a worker at
// spawn (HOROVOD_RANK is this "start rank"; the ranks of the generations
// the worker joins come from the generation, not from here).
SlotInfo start_placement(const std::vector<Slot>& wanted, const Slot& slot) {
  std::vector<HostSlots> hosts;
  for (const auto& entry : wanted) {
    if (hosts.empty() || hosts.back().host != entry.first) hosts.push_back({entry.first, 0});
    ++hosts.back().slots;
  }
  auto slots = assign_slots(hosts, static_cast<int>(wanted.size()), "the elastic host list");
  if (slots.is_ok())
    for (const auto& info : slots.value())
      if (info.host == slot.first && info.local_rank == slot.second) return info;
  return SlotInfo{slot.first, 0, 0, 1, slot.second, slot.second + 1, 0, 1};
}

// An elastic worker's environment: the static one without the EDT_ and
// torch.distributed variables that place it (its rank comes from the
// generation it joins); Horovod's HOROVOD_* ones of its start placement,
// as Horovod's elastic driver sets them; and the elastic ones.
constexpr std::chrono::seconds kWorkerJoinFloor{30};

Environment elastic_worker_environment(const JobOptions& job, const SlotInfo& start, bool remote,
                                       const Rendezvous& rendezvous, const std::string& id,
                                       milliseconds elastic_timeout) {
  WorkerEnvironmentInputs inputs{&job.launcher_env, &job.exports, remote};
  Environment env = worker_environment(start, rendezvous, inputs);
  for (const auto& [name, value] : placement_variables(start, rendezvous))
    if (name.rfind("HOROVOD_", 0) != 0) env.erase(name);
  env["HOROVOD_ELASTIC"] = "1";
  env["EDT_COORDINATOR"] = rendezvous.coordinator;
  env["EDT_HOSTNAME"] = start.host;
  env["EDT_WORKER_ID"] = id;
  env["EDT_ELASTIC"] = "1";
  // A worker waits for its generation while the others of it start: at
  // least 30 s (Horovod's workers wait HOROVOD_GLOO_TIMEOUT_SECONDS, 30 s);
  // whether the job is below its minimum for --elastic-timeout is this
  // driver's to judge (check_minimum), and it stops the workers then.
  const milliseconds wait = std::max(elastic_timeout, milliseconds(kWorkerJoinFloor));
  env["EDT_ELASTIC_TIMEOUT"] = std::to_string(wait.count()) + "ms";
  return env;
}

}  // namespace

struct ElasticDriver::Impl {
  // The driver's view of a worker; the Supervisor holds its process.
  struct Worker {
    int serial = 0;  // the supervisor's tag and the output prefix
    std::string id;  // "w<serial>", the coordinator's name for it
    std::string host;
    int slot = 0;
    Clock::time_point started_at;
    bool leaving = false;  // host removed, blacklisted or lost: not part of the job any more
  };

  Impl(ElasticDriverOptions o, std::unique_ptr<HostSource> source)
      : options(std::move(o)), hosts(std::move(source)), blacklist(options.blacklist_cooldown) {}

  ElasticDriverOptions options;
  HostTable hosts;
  Blacklist blacklist;
  // Destroyed in reverse: the supervisor (stopping every worker) first.
  std::unique_ptr<OutputSink> output;
  std::unique_ptr<TcpStoreServer> store;
  std::unique_ptr<elastic::MembershipCoordinator> coordinator;
  std::unique_ptr<Supervisor> supervisor;
  std::map<std::string, Worker> workers;  // by id: running, stopping or draining
  std::vector<std::string> failures;      // every worker failure, for the final message
  int next_serial = 0;
  std::optional<Clock::time_point> below_min_since;
  bool finishing = false;  // a worker finished: no more changes
  bool stopping = false;
  int exit_code = 0;

  // --- workers -------------------------------------------------------------

  Status start_worker(const Slot& slot, const std::vector<Slot>& wanted) {
    Worker w{next_serial++, "", slot.first, slot.second, Clock::now(), false};
    w.id = id_of(w.serial);
    const bool remote = !options.base.local.is_local(w.host);
    std::string here = "127.0.0.1";
    if (remote) {
      EDT_ASSIGN_OR_RETURN(here, address_toward(w.host));
    }
    Rendezvous r{net::format_host_port(here, store->port()), here, 0};
    Environment env = elastic_worker_environment(options.base, start_placement(wanted, slot), remote, r, w.id,
                                                 options.elastic_timeout);
    EDT_ASSIGN_OR_RETURN(pid_t pid, supervisor->spawn({w.serial, "worker " + w.id, w.host, remote, std::move(env)}));
    w.started_at = Clock::now();
    coordinator->expect(w.id, w.host, hosts.order(w.host), w.slot);
    log::debug("started worker {} on {} (pid {})", w.id, w.host, pid);
    workers[w.id] = std::move(w);
    return Status::ok();
  }

  void stop_worker(const Worker& w, const std::string& why, milliseconds wait) {
    if (supervisor->stopping(w.serial)) return;
    log::debug("stopping worker {} on {}: {}", w.id, w.host, why);
    supervisor->stop(w.serial, wait);
  }

  // A failure of `w` that the coordinator already knows of: its host goes
  // on the blacklist and `w` is stopped.
  void drop_failed(Worker& w, const std::string& what, const std::string& why) {
    failures.push_back(what);
    w.leaving = true;
    stop_worker(w, why, milliseconds(0));
    blacklist.add(w.host);
  }

  // Starts and retires workers so that the live ones match the wanted slots.
  void reconcile() {
    if (finishing || stopping) return;
    auto wanted = hosts.wanted(blacklist, options.max_np);
    std::set<Slot> want(wanted.begin(), wanted.end());
    std::set<Slot> have;
    for (auto& [id, w] : workers) {
      if (w.leaving || supervisor->stopping(w.serial)) continue;
      if (!want.count({w.host, w.slot})) {
        w.leaving = true;
        coordinator->remove(id, "host " + w.host + " left the host list");
        // It leaves at its next commit; stop it if it does not.
        stop_worker(w, "its host left the host list", options.base.grace_period);
        continue;
      }
      have.insert({w.host, w.slot});
    }
    for (const auto& s : wanted) {
      if (have.count(s)) continue;
      Status started = start_worker(s, wanted);
      if (!started.is_ok()) {
        log::info("cannot start a worker on {}: {}", s.first, started.message());
        blacklist.add(s.first);
        return;
      }
    }
  }

  void on_exit(const WorkerExit& exit) {
    auto it = workers.find(id_of(exit.tag));
    if (it == workers.end()) return;
    Worker& w = it->second;
    if (!exit.early_stderr.empty()) {  // ssh's own words, for the user
      output->write(w.serial, Stream::kStderr, exit.early_stderr);
      output->close(w.serial, Stream::kStderr);
    }
    log::debug("worker {} on {} {}", w.id, w.host, exit.status.describe());
    if (stopping || w.leaving) {
      coordinator->lost(w.id, "stopped");
      return;
    }
    if (exit.status.success()) {
      on_finished(w);
      return;
    }
    const std::string what = "worker " + w.id + " on host " + w.host + " " + exit.status.describe();
    failures.push_back(what);
    // The work may be done already (its worker wrote so before it exited):
    // then this exit is the job's result, not a failure to train through.
    if (!finishing) check_job();
    if (finishing) {
      on_failed_after_work(w, exit.status, what);
      return;
    }
    log::info("{}; the others go on without it", what);
    coordinator->lost(w.id, exit.status.describe() + " on host " + w.host);
    blacklist.add(w.host);
    // Its host is out: the other workers there would be asked to leave by
    // reconcile(); they are failures of the same host, so stop them now.
    for (auto& [id, other] : workers)
      if (&other != &w && other.host == w.host && supervisor->running(other.serial)) {
        other.leaving = true;
        coordinator->lost(id, "host " + w.host + " was blacklisted");
        stop_worker(other, "its host was blacklisted", milliseconds(0));
      }
  }

  // A worker failed once the job's work was done (after hvd.elastic.run
  // returned): the job fails with its exit code, as a static job does.
  void on_failed_after_work(const Worker& w, const ExitStatus& status, const std::string& what) {
    log::error("{}", what);
    if (exit_code == 0) exit_code = status.shell_code();
    coordinator->lost(w.id, "failed after the work was done");
  }

  void on_finished(const Worker& w) {
    if (!finishing) {
      log::debug("worker {} finished; the job ends when the others do", w.id);
      // Workers still waiting for a generation will not get one.
      (void)coordinator->shutdown("the job finished");
    }
    finishing = true;
    coordinator->lost(w.id, "finished");
  }

  // A worker returned from run(): the job's work is complete, whichever
  // workers are still alive (some may be leaving, or newcomers that never
  // joined). Like on_finished(), without a worker to retire.
  void on_work_done() {
    if (finishing) return;
    log::debug("the job finished its work; it ends when every worker has exited");
    (void)coordinator->shutdown("the job finished");
    finishing = true;
  }

  // A worker that has not registered within the start timeout failed to start.
  void check_start_timeouts() {
    const auto now = Clock::now();
    for (auto& [id, w] : workers) {
      if (supervisor->stopping(w.serial) || !supervisor->running(w.serial) || coordinator->registered(id)) continue;
      if (now - w.started_at < options.base.start_timeout) continue;
      const std::string what = "worker " + id + " on host " + w.host + " did not start within the start timeout of " +
                               seconds_text(options.base.start_timeout);
      log::info("{}", what);
      coordinator->lost(id, "did not start");
      drop_failed(w, what, "did not start");
    }
  }

  // --- the job -------------------------------------------------------------

  void fail(const std::string& message) {
    if (stopping) return;
    log::error("{}", message);
    exit_code = 1;
    stop_all(message);
  }

  void stop_all(const std::string& why) {
    if (stopping) return;
    stopping = true;
    (void)coordinator->shutdown(why);
    for (auto& [id, w] : workers) stop_worker(w, why, milliseconds(0));
  }

  void check_job() {
    if (stopping || finishing) return;
    auto polled = coordinator->poll();
    if (!polled.is_ok()) {
      fail("the rendezvous store failed: " + polled.status().message());
      return;
    }
    for (const auto& id : polled->silent) on_silent(id);
    if (polled->done) {
      on_work_done();
      return;
    }
    if (polled->published && !check_generation(*polled->published)) return;
    if (!hosts.any_hope(blacklist)) {
      std::string list;
      for (const auto& f : failures) list += "\n  " + f;
      fail("every host is blacklisted after failures; the job cannot go on:" + list);
      return;
    }
    check_minimum(*polled);
  }

  void on_silent(const std::string& id) {
    auto it = workers.find(id);
    if (it == workers.end()) return;
    Worker& w = it->second;
    const std::string what =
        "worker " + id + " on host " + w.host + " sent no heartbeat for " + seconds_text(options.heartbeat_timeout);
    log::info("{}; the others go on without it", what);
    drop_failed(w, what, "silent");
  }

  // Announces a new generation; false if it passed the reset limit.
  bool check_generation(const elastic::Generation& g) {
    std::string who;
    for (const auto& m : g.members) who += (who.empty() ? "" : " ") + m.id + "@" + m.host;
    log::info("generation {}: {} workers ({}){}", g.number, g.members.size(), who,
              g.failure ? " after a failure: " + g.why : "");
    const int64_t resets = g.number - 1;
    if (options.reset_limit >= 0 && resets > options.reset_limit) {
      fail("the job reached its reset limit (--reset-limit " + std::to_string(options.reset_limit) + ") after " +
           std::to_string(resets) + " resets; stopping");
      return false;
    }
    return true;
  }

  // Below the minimum (the workers that could run, or the coordinator says
  // so) for longer than the elastic timeout: the job fails.
  void check_minimum(const elastic::PollOutcome& polled) {
    const int usable = hosts.usable_slots(blacklist, options.max_np);
    if (usable >= options.min_np && !polled.below_min) {
      below_min_since.reset();
      return;
    }
    if (!below_min_since) below_min_since = Clock::now();
    if (Clock::now() - *below_min_since >= options.elastic_timeout) {
      fail("the job had " + std::to_string(usable) + " usable slots (" + std::to_string(polled.ready) +
           " workers ready) but needs at least " + std::to_string(options.min_np) + " (--min-np) and waited " +
           seconds_text(options.elastic_timeout) + " (--elastic-timeout); stopping");
    }
  }

  void on_signal(int sig) {
    if (stopping) {
      supervisor->kill_all();
      return;
    }
    exit_code = 128 + sig;
    log::info("got signal {} ({}); stopping every worker", sig, strsignal(sig));
    stop_all("edtrun got signal " + std::to_string(sig));
  }

  Status start() {
    if (options.base.command.empty())
      return invalid_argument("no command given; put the program to run after the options");
    if (options.min_np < 1 || options.max_np < options.min_np)
      return invalid_argument("--min-np " + std::to_string(options.min_np) + " and --max-np " +
                              std::to_string(options.max_np) + ": need 1 <= min-np <= max-np");
    if (options.base.output_dir.empty()) {
      output = terminal_output(options.base.prefix_timestamp);
    } else {  // DIR/rank.N is worker N, the [N] its lines would have on the terminal
      EDT_ASSIGN_OR_RETURN(output, directory_output(options.base.output_dir, 0));
    }
    EDT_ASSIGN_OR_RETURN(supervisor, Supervisor::create(supervisor_options(options.base, output.get())));
    EDT_ASSIGN_OR_RETURN(store, TcpStoreServer::start(TcpStoreServerOptions{}));
    elastic::CoordinatorOptions copts;
    copts.min_size = options.min_np;
    copts.max_size = options.max_np;
    copts.heartbeat_timeout = options.heartbeat_timeout;
    coordinator = std::make_unique<elastic::MembershipCoordinator>(
        std::make_shared<PrefixStore>("elastic", store->local_store()), copts);
    EDT_RETURN_IF_ERROR(hosts.read_first());
    log::debug("elastic job: min-np {}, max-np {}, hosts {}, store port {}", options.min_np, options.max_np,
               format_host_list(hosts.hosts()), store->port());
    return Status::ok();
  }

  // One turn of the loop: what the supervisor saw, then the policy.
  void turn() {
    std::vector<int> watched;
    if (hosts.source().change_fd() >= 0) watched.push_back(hosts.source().change_fd());
    SupervisorEvents events = supervisor->wait(kTick, watched);
    for (int sig : events.signals) on_signal(sig);
    const bool hosts_changed = !events.ready_fds.empty() && hosts.source().take_change();
    for (const auto& exit : events.exits) on_exit(exit);
    std::erase_if(workers, [&](const auto& entry) { return !supervisor->contains(entry.second.serial); });
    if (!stopping && !finishing) hosts.refresh(hosts_changed);
    check_start_timeouts();
    check_job();
    reconcile();
  }

  Result<int> run() {
    EDT_RETURN_IF_ERROR(start());
    do {
      turn();
    } while (!((stopping || finishing) && workers.empty()));
    return exit_code;
  }
};

ElasticDriver::ElasticDriver(ElasticDriverOptions options, std::unique_ptr<HostSource> hosts)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(hosts))) {}

ElasticDriver::~ElasticDriver() = default;

Result<int> ElasticDriver::run() { return impl_->run(); }

}  // namespace edt::launcher
