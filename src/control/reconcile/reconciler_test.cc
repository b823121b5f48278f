#include "control/reconcile/reconciler.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "control/model/cluster_json.h"
#include "control/service/service.h"

namespace edt::control {
namespace {

// A backend whose containers do what the test says: they become Ready on
// the next observe unless held, go when SIGTERMed unless stubborn, and hold
// as many training workers as `workers` says (none unless set).
class FakeBackend : public Backend {
 public:
  Status prepare_cluster(const std::string&) override { return Status::ok(); }
  // Called for several containers at once; with `meet` set, a start waits
  // (up to 2 s) until another has begun.
  Result<SandboxRef> start(const SandboxSpec& spec) override {
    std::unique_lock lock(start_mu);
    ++starting;
    most_at_once = std::max(most_at_once, starting);
    started_cv.notify_all();
    if (meet) started_cv.wait_for(lock, std::chrono::seconds(2), [&] { return starting >= 2; });
    struct Done {
      int& n;
      ~Done() { --n; }
    } done{starting};
    events.push_back("start " + spec.name);
    if (fail_start == spec.name) {
      // A start cut short may leave a process of the sandbox behind.
      if (leak_on_fail) {
        labels[++next_pid] = {spec.cluster, spec.name};
        state[next_pid] = SandboxState::kStarting;
      }
      return internal_error("no room for " + spec.name);
    }
    specs[spec.name] = spec;
    SandboxRef ref{++next_pid, 1};
    state[ref.pid] = SandboxState::kStarting;
    labels[ref.pid] = {spec.cluster, spec.name};
    return ref;
  }
  // Its sandboxes are labelled: found whether or not they were recorded.
  Result<std::vector<FoundSandbox>> running_sandboxes() override {
    std::vector<FoundSandbox> out;
    for (const auto& [pid, s] : state) out.push_back({labels[pid].first, labels[pid].second, SandboxRef{pid, 1}});
    return out;
  }
  Result<int> end_sandboxes_except(const std::vector<SandboxRef>& keep) override {
    int ended = 0;
    for (auto it = state.begin(); it != state.end();) {
      const bool kept = std::find(keep.begin(), keep.end(), SandboxRef{it->first, 1}) != keep.end();
      if (!kept) events.push_back("end " + labels[it->first].second);
      it = kept ? std::next(it) : state.erase(it);
      ended += kept ? 0 : 1;
    }
    return ended;
  }
  SandboxState observe(const std::string& name, const SandboxRef& ref) override {
    if (during_observe) std::exchange(during_observe, nullptr)();
    auto it = state.find(ref.pid);
    if (it == state.end()) return SandboxState::kGone;
    if (queued.count(name)) return SandboxState::kQueued;
    if (it->second == SandboxState::kStarting && !held.count(name)) it->second = SandboxState::kReady;
    return it->second;
  }
  // As an engine says: `node` for the placed, `reason` for the queued and
  // the ended.
  SandboxPlacement placement(const SandboxRef& ref) override {
    if (node.empty()) return {};
    const bool waits = queued.count(labels[ref.pid].second) > 0, ended = !state.count(ref.pid);
    return {waits ? "" : node, ref.pid, waits || ended ? reason : ""};
  }
  Status signal(const SandboxRef& ref, int sig) override {
    events.push_back(std::string(sig == SIGKILL ? "kill " : "term ") + std::to_string(ref.pid));
    if (sig == SIGKILL || !stubborn) state.erase(ref.pid);
    return Status::ok();
  }
  Result<int> training_processes(const SandboxRef& ref) override {
    if (!state.count(ref.pid)) return 0;
    auto it = workers.find(ref.pid);
    return it == workers.end() ? 0 : it->second;
  }
  Status remove(const std::string& name) override {
    events.push_back("remove " + name);
    return Status::ok();
  }
  Status write_cluster_files(const std::string&, const ClusterFiles& f) override {
    if (f.hostfile != files.hostfile) events.push_back("hostfile " + std::to_string(std::count(f.hostfile.begin(), f.hostfile.end(), '\n')));
    files = f;
    return Status::ok();
  }
  Status remove_cluster(const std::string& cluster) override {
    events.push_back("remove-cluster " + cluster);
    return Status::ok();
  }
  Result<SandboxRef> exec(const SandboxRef&, const ExecSpec&) override { return internal_error("not used"); }
  Result<std::string> ssh_private_key(const std::string&) override { return std::string("key"); }
  int ssh_port() const override { return 22; }

  std::vector<std::string> events;
  std::map<int64_t, SandboxState> state;
  std::map<int64_t, int> workers;  // by pid
  std::map<std::string, SandboxSpec> specs;
  std::map<int64_t, std::pair<std::string, std::string>> labels;  // by pid: cluster, container
  std::set<std::string> held;
  std::set<std::string> queued;  // containers the engine has not placed
  std::string node, reason;      // placement(): empty node, no placement
  std::string fail_start;
  bool leak_on_fail = false;
  bool stubborn = false;
  std::function<void()> during_observe;  // run once, in the middle of a pass
  ClusterFiles files;
  int64_t next_pid = 100;
  std::mutex start_mu;
  std::condition_variable started_cv;
  bool meet = false;
  int starting = 0;
  int most_at_once = 0;
};

class ReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("edt-reconcile-test-" + std::to_string(getpid()) + ".db");
    db_ = Database::open(path_.string()).value();
    service_ = std::make_unique<Service>(db_.get(), ServiceOptions{AddressRange::parse("127.91.0.0/24").value(), "", {}});
    std::vector<Gpu> gpus;
    for (int i = 0; i < 4; ++i) gpus.push_back({i, "P4", true, ""});
    ASSERT_TRUE(service_->set_inventory({"edt", "/", {"horovod", "megatron"}, true}, gpus).is_ok());
    auto token = service_->ensure_admin();
    ASSERT_TRUE(token.is_ok() && token->has_value());
    admin_ = *service_->authenticate(**token);
    ASSERT_TRUE(service_->create_user(admin_, alice_.name).is_ok());
    start_reconciler();
  }
  // A reconciler as a (re)started edtd makes one, on the clock now_ms_.
  void start_reconciler() {
    ReconcilerOptions options;
    options.grace = std::chrono::milliseconds(0);
    options.base_env = {{"PATH", "/usr/bin"}};
    options.now_ms = [this] { return now_ms_; };
    options.addresses = AddressRange::parse("127.91.0.0/24").value();
    reconciler_ = std::make_unique<Reconciler>(db_.get(), &backend_, options);
  }
  // edtd stops and starts again on the same database file.
  void restart_edtd() {
    reconciler_.reset();
    service_.reset();
    db_.reset();
    db_ = Database::open(path_.string()).value();
    service_ = std::make_unique<Service>(db_.get(), ServiceOptions{AddressRange::parse("127.91.0.0/24").value(), "", {}});
    start_reconciler();
  }
  void TearDown() override {
    reconciler_.reset();
    service_.reset();
    db_.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_.string() + suffix);
  }
  int64_t pid_of(const std::string& container) {
    for (const auto& r : db_->lock().containers("a"))
      if (r.status.name == container) return r.sandbox.pid;
    return -1;
  }
  Phase phase_of(const std::string& container) {
    for (const auto& r : db_->lock().containers("a"))
      if (r.status.name == container) return r.status.phase;
    return Phase::kPending;
  }
  int signals() {
    return static_cast<int>(std::count_if(backend_.events.begin(), backend_.events.end(), [](auto& e) {
      return e.rfind("term ", 0) == 0 || e.rfind("kill ", 0) == 0;
    }));
  }
  std::vector<ClusterEvent> events_of(EventType type) {
    std::vector<ClusterEvent> out;
    for (const auto& e : db_->lock().events("a"))
      if (e.type == type) out.push_back(e);
    return out;
  }
  // A 4-container cluster "a", Running, whose two highest workers then hold
  // training workers, scaled down to 2.
  void scale_down_with_workers(std::optional<std::chrono::milliseconds> drain_timeout = std::nullopt) {
    create("a", 4);
    settle("a");
    backend_.workers[pid_of("a-worker-1")] = 2;
    backend_.workers[pid_of("a-worker-2")] = 1;
    backend_.events.clear();
    ASSERT_TRUE(service_->scale_cluster(alice_, "a", 2, drain_timeout).is_ok());
  }
  void create(const std::string& name, int containers, int gpus = 0, const std::string& framework = "horovod") {
    ClusterSpec spec;
    spec.name = name;
    spec.framework = framework;
    spec.containers = containers;
    if (gpus) spec.gpu = {"P4", gpus};
    ASSERT_TRUE(service_->create_cluster(alice_, spec).is_ok());
  }
  // A sandbox the backend runs and the store does not record, as a crash
  // between starting it and recording it leaves one.
  void start_unrecorded(const std::string& cluster, const std::string& name) {
    SandboxSpec spec;
    spec.cluster = cluster;
    spec.name = name;
    ASSERT_TRUE(backend_.start(spec).is_ok());
  }
  // Runs passes until one says it is settled; returns how many it took.
  int settle(const std::string& name) {
    for (int i = 1; i <= 20; ++i) {
      auto r = reconciler_->reconcile(name);
      EXPECT_TRUE(r.is_ok()) << r.status().to_string();
      if (r.is_ok() && r->done()) return i;
    }
    return -1;
  }

  std::filesystem::path path_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<Service> service_;
  User alice_{"alice", false};
  User admin_;
  FakeBackend backend_;
  std::unique_ptr<Reconciler> reconciler_;
  int64_t now_ms_ = 1767225600000;
};

// A container its engine has not placed (a pending Slurm job) is Pending
// with the engine's reason for as long as it waits, past the start timeout;
// once placed it starts, its node and job recorded.
TEST_F(ReconcilerTest, AQueuedContainerWaitsPendingWithTheEnginesReason) {
  backend_.node = "n2";
  backend_.reason = "Slurm job 7 is PENDING: Resources";
  backend_.queued.insert("a-worker-0");
  create("a", 2);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(reconciler_->reconcile("a").is_ok());
  now_ms_ += 10 * 60 * 1000;  // far past the start timeout
  ASSERT_TRUE(reconciler_->reconcile("a").is_ok());
  auto c = db_->lock().cluster("a");
  EXPECT_EQ(c->phase, Phase::kCreating);
  EXPECT_EQ(c->containers[0].phase, Phase::kRunning);
  EXPECT_EQ(c->containers[0].node, "n2");
  EXPECT_EQ(c->containers[0].slurm_job, pid_of("a-launcher"));
  EXPECT_EQ(c->containers[1].phase, Phase::kPending);
  EXPECT_EQ(c->containers[1].message, "Slurm job 7 is PENDING: Resources");
  EXPECT_EQ(c->containers[1].node, "");
  EXPECT_EQ(backend_.files.hostfile, "a-launcher slots=1\n");
  backend_.queued.clear();
  EXPECT_GT(settle("a"), 0);
  c = db_->lock().cluster("a");
  EXPECT_EQ(c->phase, Phase::kRunning);
  EXPECT_EQ(c->containers[1].phase, Phase::kRunning);
  EXPECT_EQ(c->containers[1].message, "");
  EXPECT_EQ(c->containers[1].node, "n2");
  EXPECT_EQ(c->containers[1].slurm_job, pid_of("a-worker-0"));
}

// A container whose engine ended it says how in its message and event.
TEST_F(ReconcilerTest, ARestartSaysHowTheEngineEndedTheContainer) {
  backend_.node = "n1";
  create("a", 2);
  settle("a");
  backend_.reason = "Slurm job 102 on n1 ended: CANCELLED";
  backend_.state.erase(pid_of("a-worker-0"));
  ASSERT_TRUE(reconciler_->reconcile("a").is_ok());
  auto c = db_->lock().cluster("a");
  EXPECT_EQ(c->containers[1].message, "restarted after it stopped (Slurm job 102 on n1 ended: CANCELLED)");
  const auto restarted = events_of(EventType::kRestarted);
  ASSERT_EQ(restarted.size(), 1u);
  EXPECT_EQ(restarted[0].message, "a-worker-0 stopped (Slurm job 102 on n1 ended: CANCELLED) and was started again");
}

TEST_F(ReconcilerTest, CreatesThenIsIdempotent) {
  create("a", 2, 1);
  EXPECT_GT(settle("a"), 1);
  auto c = db_->lock().cluster("a");
  EXPECT_EQ(c->phase, Phase::kRunning);
  EXPECT_TRUE(c->ever_running);
  for (const auto& k : c->containers) EXPECT_EQ(k.phase, Phase::kRunning);
  EXPECT_EQ(backend_.files.hostfile, "a-launcher slots=1\na-worker-0 slots=1\n");
  EXPECT_EQ(backend_.files.discover, "a-launcher:1\na-worker-0:1\n");
  EXPECT_EQ(backend_.files.hostnames, "a-launcher\na-worker-0\n");
  EXPECT_NE(backend_.files.hosts.find(c->containers[1].address + "\ta-worker-0"), std::string::npos);
  EXPECT_EQ(backend_.specs["a-worker-0"].env["CUDA_VISIBLE_DEVICES"], "0");  // its one GPU, as CUDA numbers it
  EXPECT_EQ(backend_.specs["a-worker-0"].env["EDT_HOST_GPUS"], "1");
  EXPECT_EQ(backend_.specs["a-worker-0"].env["PATH"], "/usr/bin");
  // Nothing changed: another pass does nothing at all.
  auto events = backend_.events;
  EXPECT_EQ(settle("a"), 1);
  EXPECT_EQ(backend_.events, events);
}

TEST_F(ReconcilerTest, ScaleUpListsNewContainersOnceRunning) {
  create("a", 2);
  settle("a");
  ASSERT_TRUE(service_->scale_cluster(alice_, "a", 4).is_ok());
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kScaling);
  backend_.held.insert("a-worker-2");
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(backend_.files.hostfile, "a-launcher slots=1\na-worker-0 slots=1\na-worker-1 slots=1\n");
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kScaling);
  backend_.held.clear();
  settle("a");
  EXPECT_EQ(std::count(backend_.files.hostfile.begin(), backend_.files.hostfile.end(), '\n'), 4);
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kRunning);
}

// A scale that lands while a pass runs: that pass saw the 3 containers of
// the scale before Running, and must not record the cluster, now of 4, as
// Running.
TEST_F(ReconcilerTest, APassDoesNotCallAScaleThatLandedDuringItRunning) {
  create("a", 2);
  settle("a");
  ASSERT_TRUE(service_->scale_cluster(alice_, "a", 3).is_ok());
  backend_.held.insert("a-worker-1");
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(reconciler_->reconcile("a")->done());
  backend_.held.clear();
  backend_.during_observe = [this] { ASSERT_TRUE(service_->scale_cluster(alice_, "a", 4).is_ok()); };
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kScaling);
  settle("a");
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kRunning);
  EXPECT_EQ(db_->lock().cluster("a")->message, "4 of 4 containers Running");
}

TEST_F(ReconcilerTest, ScaleDownLeavesTheFilesBeforeBeingStopped) {
  create("a", 4);
  settle("a");
  backend_.events.clear();
  backend_.stubborn = true;  // they ignore SIGTERM: SIGKILL after the grace
  ASSERT_TRUE(service_->scale_cluster(alice_, "a", 2).is_ok());
  settle("a");
  ASSERT_GE(backend_.events.size(), 7u);
  EXPECT_EQ(backend_.events[0], "hostfile 2");
  EXPECT_EQ(backend_.events[1].rfind("term ", 0), 0u);
  EXPECT_EQ(backend_.events[2].rfind("term ", 0), 0u);
  EXPECT_NE(std::find(backend_.events.begin(), backend_.events.end(), "remove a-worker-2"), backend_.events.end());
  EXPECT_EQ(std::count_if(backend_.events.begin(), backend_.events.end(), [](auto& e) { return e.rfind("kill", 0) == 0; }), 2);
  EXPECT_EQ(db_->lock().containers("a").size(), 2u);
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kRunning);
}

TEST_F(ReconcilerTest, FailedCreateRemovesEverything) {
  create("a", 3, 1);
  backend_.fail_start = "a-worker-1";
  settle("a");
  auto c = db_->lock().cluster("a");
  EXPECT_EQ(c->phase, Phase::kFailed);
  EXPECT_NE(c->message.find("no room for a-worker-1"), std::string::npos) << c->message;
  EXPECT_TRUE(c->containers.empty());
  EXPECT_TRUE(backend_.state.empty()) << "a started container was left running";
  EXPECT_EQ(backend_.events.back(), "remove-cluster a");
  EXPECT_EQ(db_->lock().catalog(std::nullopt).gpus_free["P4"], 4);
}

TEST_F(ReconcilerTest, FailedScaleGoesBackToTheFormerSize) {
  create("a", 2);
  settle("a");
  ASSERT_TRUE(service_->scale_cluster(alice_, "a", 4).is_ok());
  backend_.fail_start = "a-worker-2";
  settle("a");
  auto c = db_->lock().cluster("a");
  EXPECT_EQ(c->phase, Phase::kRunning);
  EXPECT_EQ(c->spec.containers, 2);
  EXPECT_EQ(c->containers.size(), 2u);
  EXPECT_NE(c->message.find("scale to 4 failed"), std::string::npos) << c->message;
  EXPECT_EQ(backend_.files.hostfile, "a-launcher slots=1\na-worker-0 slots=1\n");
  EXPECT_EQ(backend_.state.size(), 2u) << "a-worker-1, started with a-worker-2, was left running";
  // The failure stays the message while it runs at the former size...
  EXPECT_EQ(settle("a"), 1);
  EXPECT_EQ(db_->lock().cluster("a")->message, c->message);
  // ...until the next scale, which succeeds.
  backend_.fail_start.clear();
  ASSERT_TRUE(service_->scale_cluster(alice_, "a", 3).is_ok());
  settle("a");
  EXPECT_EQ(db_->lock().cluster("a")->message, "3 of 3 containers Running");
  std::vector<std::string> types;
  for (const auto& e : db_->lock().events("a")) types.push_back(to_string(e.type));
  EXPECT_EQ(types, (std::vector<std::string>{"Created", "Running", "Scaling", "Failed", "Running", "Scaling", "Running"}));
}

// A scale to 5 lands while a pass starts the containers of a scale to 4,
// one of which fails: that pass's undo must not put back the size it read
// (2 of 4 Running), which would strand the container the scale to 5 added.
// The next pass fails the start again and goes back from there: to the 3
// then Running (a-worker-1 started with the failed one).
TEST_F(ReconcilerTest, AFailedStartDoesNotUndoAScaleThatLandedDuringIt) {
  create("a", 2);
  settle("a");
  ASSERT_TRUE(service_->scale_cluster(alice_, "a", 4).is_ok());
  backend_.fail_start = "a-worker-2";
  backend_.during_observe = [this] { ASSERT_TRUE(service_->scale_cluster(alice_, "a", 5).is_ok()); };
  settle("a");
  auto c = db_->lock().cluster("a");
  EXPECT_EQ(c->phase, Phase::kRunning);
  EXPECT_EQ(c->spec.containers, 3);
  EXPECT_EQ(c->containers.size(), 3u);
  EXPECT_NE(c->message.find("scale to 5 failed: no room for a-worker-2; back to 3"), std::string::npos) << c->message;
  EXPECT_EQ(backend_.files.hostfile, "a-launcher slots=1\na-worker-0 slots=1\na-worker-1 slots=1\n");
  EXPECT_EQ(backend_.state.size(), 3u);
}

TEST_F(ReconcilerTest, TheContainersOfAScaleStartAtOnce) {
  create("a", 2);
  settle("a");
  ASSERT_TRUE(service_->scale_cluster(alice_, "a", 4).is_ok());
  backend_.meet = true;
  backend_.most_at_once = 0;
  ASSERT_TRUE(reconciler_->reconcile("a").is_ok());
  EXPECT_EQ(backend_.most_at_once, 2) << "the two new containers started one after the other";
  EXPECT_EQ(phase_of("a-worker-1"), Phase::kCreating);
  EXPECT_EQ(phase_of("a-worker-2"), Phase::kCreating);
  EXPECT_NE(pid_of("a-worker-1"), pid_of("a-worker-2"));
  settle("a");
  EXPECT_EQ(db_->lock().cluster("a")->message, "4 of 4 containers Running");
}

TEST_F(ReconcilerTest, RestartsAContainerThatDiedAndDeletes) {
  create("m", 3, 0, "megatron");
  settle("m");
  EXPECT_EQ(backend_.specs["m-worker-1"].env["NODE_RANK"], "2");
  EXPECT_EQ(backend_.specs["m-worker-1"].env["MASTER_ADDR"], "m-launcher");
  EXPECT_EQ(backend_.specs["m-worker-1"].env["GPUS_PER_NODE"], "1");
  backend_.state.erase(db_->lock().containers("m")[1].sandbox.pid);  // m-worker-0 died
  settle("m");
  EXPECT_EQ(db_->lock().containers("m")[1].status.message, "restarted after it stopped");
  EXPECT_EQ(db_->lock().cluster("m")->phase, Phase::kRunning);
  ASSERT_TRUE(service_->delete_cluster(alice_, "m").is_ok());
  settle("m");
  EXPECT_FALSE(db_->lock().cluster("m").has_value());
  EXPECT_TRUE(backend_.state.empty());
}

TEST_F(ReconcilerTest, ADrainingContainerIsNotSignalledWhileWorkersRemain) {
  scale_down_with_workers();
  auto scaling = db_->lock().cluster("a");
  EXPECT_NE(scaling->message.find("a-worker-1, a-worker-2 leave the hostfile and drain"), std::string::npos)
      << scaling->message;
  EXPECT_NE(db_->lock().events("a").back().message.find("drain"), std::string::npos);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(reconciler_->reconcile("a")->done());
    now_ms_ += 1000;
  }
  EXPECT_EQ(backend_.events, std::vector<std::string>{"hostfile 2"});
  EXPECT_EQ(phase_of("a-worker-1"), Phase::kDraining);
  EXPECT_EQ(phase_of("a-worker-2"), Phase::kDraining);
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kScaling);
  auto json = cluster_to_json(*db_->lock().cluster("a"));
  EXPECT_EQ(json["status"]["containers"][2]["phase"], "Draining");
  EXPECT_EQ(json["drain_timeout"], "60s");
  // The hosts file keeps them while they drain: their workers still talk to peers.
  EXPECT_NE(backend_.files.hosts.find("a-worker-2"), std::string::npos);
}

TEST_F(ReconcilerTest, ADrainedContainerIsSignalledOnceItsWorkersAreGone) {
  scale_down_with_workers();
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  now_ms_ += 1500;
  backend_.workers[pid_of("a-worker-1")] = 0;
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(backend_.events, (std::vector<std::string>{"hostfile 2", "term " + std::to_string(pid_of("a-worker-1"))}));
  ASSERT_EQ(events_of(EventType::kDrained).size(), 1u);
  EXPECT_EQ(events_of(EventType::kDrained)[0].message, "a-worker-1 drained in 1.5 s: no edtrun worker left in it; stopping it");
  EXPECT_EQ(phase_of("a-worker-2"), Phase::kDraining);
  backend_.workers[pid_of("a-worker-2")] = 0;
  settle("a");
  EXPECT_EQ(signals(), 2);
  EXPECT_EQ(db_->lock().containers("a").size(), 2u);
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kRunning);
  EXPECT_EQ(db_->lock().cluster("a")->message, "2 of 2 containers Running");
  EXPECT_TRUE(events_of(EventType::kDrainTimedOut).empty());
  EXPECT_EQ(backend_.files.hosts.find("a-worker-2"), std::string::npos);
}

TEST_F(ReconcilerTest, ADrainThatOutlastsItsDeadlineIsStoppedWithAnEvent) {
  scale_down_with_workers(std::chrono::seconds(5));
  EXPECT_EQ(db_->lock().cluster("a")->spec.drain_timeout, std::chrono::seconds(5));
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  now_ms_ += 4999;
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(signals(), 0);
  now_ms_ += 1;
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(signals(), 2);
  auto timed_out = events_of(EventType::kDrainTimedOut);
  ASSERT_EQ(timed_out.size(), 2u);
  EXPECT_EQ(timed_out[0].message,
            "a-worker-1: drain timed out after 5s; 2 edtrun worker processes were still in it; stopping it "
            "(SIGTERM, SIGKILL after 0s)");
  EXPECT_NE(timed_out[1].message.find("1 edtrun worker process was still in it"), std::string::npos);
  settle("a");
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kRunning);
}

TEST_F(ReconcilerTest, ADrainTimeoutOfZeroStopsAtOnce) {
  scale_down_with_workers(std::chrono::milliseconds(0));
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(signals(), 2);
  EXPECT_TRUE(events_of(EventType::kDrained).empty());
}

// Deleting means the job goes with the cluster: nothing waits for workers,
// not even a drain that had begun.
TEST_F(ReconcilerTest, DeletingAClusterDoesNotWaitForADrain) {
  scale_down_with_workers();
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(signals(), 0);
  backend_.workers[pid_of("a-launcher")] = 1;
  ASSERT_TRUE(service_->delete_cluster(alice_, "a").is_ok());
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(signals(), 4);
  settle("a");
  EXPECT_FALSE(db_->lock().cluster("a").has_value());
  EXPECT_TRUE(backend_.state.empty());
}

TEST_F(ReconcilerTest, ARestartedEdtdKeepsTheDrainsDeadline) {
  scale_down_with_workers(std::chrono::seconds(10));
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  const int64_t began = now_ms_;
  now_ms_ += 6000;
  restart_edtd();
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(phase_of("a-worker-1"), Phase::kDraining);
  EXPECT_EQ(signals(), 0);
  now_ms_ = began + 9999;
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(signals(), 0);
  now_ms_ = began + 10000;  // the deadline from when the drain began, not from the restart
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(signals(), 2);
  EXPECT_EQ(events_of(EventType::kDrainTimedOut).size(), 2u);
}

}  // namespace
}  // namespace edt::control

namespace edt::control {
namespace {

// edtd died after starting a sandbox, before recording its pid: the
// restarted edtd adopts it instead of starting a second one on its address.
TEST_F(ReconcilerTest, RecoverAdoptsASandboxStartedButNotRecorded) {
  create("a", 2);
  settle("a");
  ASSERT_TRUE(service_->scale_cluster(alice_, "a", 3).is_ok());
  start_unrecorded("a", "a-worker-1");  // then the crash
  const int64_t unrecorded = backend_.next_pid;
  EXPECT_EQ(pid_of("a-worker-1"), 0);
  restart_edtd();
  backend_.events.clear();
  ASSERT_TRUE(reconciler_->recover().is_ok());
  EXPECT_EQ(pid_of("a-worker-1"), unrecorded);
  EXPECT_EQ(phase_of("a-worker-1"), Phase::kCreating);
  settle("a");
  EXPECT_EQ(std::count_if(backend_.events.begin(), backend_.events.end(), [](auto& e) { return e.rfind("start", 0) == 0 || e.rfind("end", 0) == 0; }), 0);
  EXPECT_EQ(phase_of("a-worker-1"), Phase::kRunning);
  EXPECT_EQ(backend_.state.size(), 3u);
}

// The same while a Running container whose sandbox died was being started
// again: the adopted sandbox gets its own start_timeout, counted from now.
TEST_F(ReconcilerTest, RecoverAdoptsARestartedSandboxWithAFreshStartTimeout) {
  create("a", 2);
  settle("a");
  backend_.state.erase(pid_of("a-worker-0"));  // it died...
  start_unrecorded("a", "a-worker-0");          // ...edtd started it again, then crashed
  backend_.held.insert("a-worker-0");           // its sshd does not listen yet
  now_ms_ += 60000;                             // long after the container was first created
  restart_edtd();
  ASSERT_TRUE(reconciler_->recover().is_ok());
  EXPECT_EQ(pid_of("a-worker-0"), backend_.next_pid);
  EXPECT_FALSE(reconciler_->reconcile("a")->done());
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kScaling);
  backend_.held.clear();
  settle("a");
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kRunning);
  EXPECT_EQ(db_->lock().cluster("a")->message, "2 of 2 containers Running");
  EXPECT_TRUE(events_of(EventType::kFailed).empty());
  EXPECT_EQ(backend_.state.size(), 2u);
}

// A sandbox no row claims (its row was deleted, or its cluster's), and a
// second sandbox of a container whose recorded one runs, are ended; the
// recorded ones are kept.
TEST_F(ReconcilerTest, RecoverEndsSandboxesNoContainerClaims) {
  create("a", 2);
  settle("a");
  const int64_t launcher = pid_of("a-launcher");
  start_unrecorded("gone", "gone-launcher");
  start_unrecorded("a", "a-launcher");
  start_unrecorded("b", "a-worker-0");  // another cluster's label
  restart_edtd();
  backend_.events.clear();
  ASSERT_TRUE(reconciler_->recover().is_ok());
  std::sort(backend_.events.begin(), backend_.events.end());
  EXPECT_EQ(backend_.events, (std::vector<std::string>{"end a-launcher", "end a-worker-0", "end gone-launcher",
                                                       "remove gone-launcher"}));
  EXPECT_EQ(pid_of("a-launcher"), launcher);
  EXPECT_EQ(backend_.state.size(), 2u);
  backend_.events.clear();
  EXPECT_EQ(settle("a"), 1);
  EXPECT_TRUE(backend_.events.empty());
}

// A start that fails may leave a process of its sandbox; the worker
// recovers right after such a pass, before the next one.
TEST_F(ReconcilerTest, RecoverRunsAfterAFailedStart) {
  create("a", 2);
  backend_.fail_start = "a-worker-0";
  backend_.leak_on_fail = true;
  reconciler_->start();
  for (int i = 0; i < 1000; ++i) {
    auto c = db_->lock().cluster("a");
    if (c->phase == Phase::kFailed && c->containers.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  reconciler_->stop();
  EXPECT_EQ(db_->lock().cluster("a")->phase, Phase::kFailed);
  EXPECT_TRUE(backend_.state.empty()) << backend_.state.size() << " sandboxes left";
}

}  // namespace
}  // namespace edt::control

namespace edt::control {
namespace {

// The scheduler's pass (kScheduleKey) on the fakes: each GPU container of a
// cluster by name, its pid, and whether the backend was ever told to stop it.
class SchedulerPassTest : public ReconcilerTest {
 protected:
  int64_t pid_in(const std::string& cluster, const std::string& container) {
    for (const auto& r : db_->lock().containers(cluster))
      if (r.status.name == container) return r.sandbox.pid;
    return -1;
  }
  bool signalled(int64_t pid) {
    const std::string p = std::to_string(pid);
    return std::count(backend_.events.begin(), backend_.events.end(), "term " + p) +
               std::count(backend_.events.begin(), backend_.events.end(), "kill " + p) > 0;
  }
  void create_as(const User& user, const std::string& name, int containers, std::optional<ElasticBounds> elastic = {}) {
    ClusterSpec spec;
    spec.name = name;
    spec.framework = "horovod";
    spec.containers = containers;
    spec.gpu = {"P4", 1};
    if (elastic) spec.elastic = *elastic;
    auto made = service_->create_cluster(user, spec);
    ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  }
  void schedule_pass() {
    auto r = reconciler_->reconcile(kScheduleKey);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  }
};

// A cluster queued behind one that holds every GPU starts once that one's
// containers are gone, on the scheduler's pass: not before.
TEST_F(SchedulerPassTest, AQueuedClusterIsAdmittedWhenAHoldersGpusGo) {
  create_as(alice_, "a", 4);
  settle("a");
  create_as(alice_, "b", 2);
  auto b = db_->lock().cluster("b");
  EXPECT_EQ(b->phase, Phase::kPending);
  ASSERT_TRUE(b->queued.waiting());
  EXPECT_EQ(b->queued.position, 1);
  EXPECT_TRUE(db_->lock().containers("b").empty());
  ASSERT_TRUE(service_->delete_cluster(alice_, "a").is_ok());
  schedule_pass();  // a's containers still hold their GPUs
  EXPECT_TRUE(db_->lock().cluster("b")->queued.waiting());
  settle("a");
  EXPECT_FALSE(db_->lock().cluster("a").has_value());
  schedule_pass();
  b = db_->lock().cluster("b");
  EXPECT_FALSE(b->queued.waiting());
  EXPECT_EQ(b->phase, Phase::kCreating);
  EXPECT_EQ(db_->lock().containers("b").size(), 2u);
  EXPECT_GT(settle("b"), 0);
  EXPECT_EQ(db_->lock().cluster("b")->phase, Phase::kRunning);
  std::vector<std::string> types;
  for (const auto& e : db_->lock().events("b")) types.push_back(to_string(e.type));
  EXPECT_NE(std::find(types.begin(), types.end(), "Queued"), types.end());
  EXPECT_NE(std::find(types.begin(), types.end(), "Scheduled"), types.end());
}

// Teams ml (alice) and cv (bob), each guaranteed 2 of the 4 GPUs, allowed to
// borrow 2 more. ml's elastic cluster grows into all 4; cv's request within
// its guarantee drains only the 2 borrowed containers, at their job's next
// commit (their workers gone), and is placed after: the guaranteed part is
// never signalled.
TEST_F(SchedulerPassTest, ABorrowedContainerDrainsAndTheGuaranteedRequestIsPlacedAfter) {
  ASSERT_TRUE(service_->create_user(admin_, "bob").is_ok());
  for (const std::string team : {"ml", "cv"}) {
    ASSERT_TRUE(service_->create_team(admin_, team).is_ok());
    ASSERT_TRUE(service_->set_quota(admin_, {team, "P4", 2, 2}).is_ok());
  }
  ASSERT_TRUE(service_->set_user_team(admin_, "alice", "ml").is_ok());
  ASSERT_TRUE(service_->set_user_team(admin_, "bob", "cv").is_ok());
  const User alice{"alice", false, "ml"}, bob{"bob", false, "cv"};
  create_as(alice, "e", 2, ElasticBounds{2, 4});
  settle("e");
  ASSERT_EQ(db_->lock().containers("e").size(), 4u);
  const int64_t kept0 = pid_in("e", "e-launcher"), kept1 = pid_in("e", "e-worker-0");
  const int64_t lent0 = pid_in("e", "e-worker-1"), lent1 = pid_in("e", "e-worker-2");
  for (int64_t pid : {kept0, kept1, lent0, lent1}) backend_.workers[pid] = 1;
  backend_.events.clear();
  create_as(bob, "f", 2);
  ASSERT_TRUE(db_->lock().cluster("f")->queued.waiting());
  // The borrowed two drain while their job has not committed: f waits.
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(reconciler_->reconcile("e")->done());
    schedule_pass();
    now_ms_ += 100;
  }
  EXPECT_TRUE(db_->lock().cluster("f")->queued.waiting());
  EXPECT_EQ(db_->lock().cluster("f")->phase, Phase::kPending);
  auto e = db_->lock().containers("e");
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[2].status.phase, Phase::kDraining);
  EXPECT_EQ(e[3].status.phase, Phase::kDraining);
  // Their job commits: the workers leave, the containers stop and go.
  backend_.workers[lent0] = backend_.workers[lent1] = 0;
  settle("e");
  schedule_pass();
  auto f = db_->lock().cluster("f");
  EXPECT_FALSE(f->queued.waiting());
  EXPECT_GT(settle("f"), 0);
  EXPECT_EQ(db_->lock().cluster("f")->phase, Phase::kRunning);
  EXPECT_EQ(db_->lock().containers("e").size(), 2u);
  EXPECT_EQ(db_->lock().cluster("e")->phase, Phase::kRunning);
  EXPECT_TRUE(signalled(lent0) && signalled(lent1));
  EXPECT_FALSE(signalled(kept0) || signalled(kept1));
  EXPECT_EQ(pid_in("e", "e-launcher"), kept0);
  EXPECT_EQ(pid_in("e", "e-worker-0"), kept1);
  auto ml = service_->team(admin_, "ml");
  ASSERT_TRUE(ml.is_ok());
  EXPECT_EQ(ml->quotas[0].in_use, 2);
  EXPECT_EQ(ml->quotas[0].borrowed(), 0);
}

}  // namespace
}  // namespace edt::control
