// Membership generations: how the workers of an elastic job agree, through
// the rendezvous store, on who is in the job and who holds the state.
//
// Roles. One coordinator (edtrun's elastic driver, which knows what it
// spawned and which processes died) decides the membership; workers follow
// it. The coordinator never talks to workers directly: everything goes
// through keys of one store (the caller scopes it, e.g. under "elastic/").
//
// Keys:
//   worker/<id>            "<host>": the worker is up and reachable (it
//                          registered); written once by the worker.
//   heartbeat/<id>         a counter the worker bumps every heartbeat
//                          interval; a worker whose counter stops moving for
//                          the heartbeat timeout is lost (a silent host).
//   gen/<g>/members        generation g: its kind ("hosts-updated" or
//                          "failure: <why>") on the first line, then one
//                          "<id> <host>" line per member in rank order.
//   generation             the newest published g. Written after
//                          gen/<g>/members, so a reader of it finds the plan.
//   gen/<g>/commit/<id>    a member arrived in g; the value is the id of its
//                          last commit. Once every member has arrived, each
//                          computes the state source: the member with the
//                          highest commit id (the lowest rank on ties).
//   gen/<g>/broken         the first failure a member of g reported (a
//                          collective failed); the coordinator forms g+1.
//   gen/<g>/comm/...       the store prefix of generation g's communicator.
//   removed/<id>           the worker left the job (its host was removed);
//                          the value says why. It stops at its next
//                          membership check.
//   shutdown               the job is over; the value says why. Workers
//                          waiting for a generation return it as kAborted.
//   done                   the job's work is complete: a member's training
//                          function returned in a generation (value
//                          "<g> <id>"). Part of the committed state of the
//                          job: the coordinator forms no generation after
//                          it, and a worker that arrives later (or waits for
//                          a generation) ends cleanly instead of training
//                          again from its initial state.
//
// Generations are numbered 1, 2, ... and never change once published. A
// worker in generation g that sees a newer one either finishes its work up
// to the next commit (kind hosts-updated) or abandons g at once (kind
// failure: its communicator may hang on a silent peer).
//
// Ranks: the coordinator orders members by (host order, slot): hosts that
// were in the job first keep the lower ranks, and a host's slots are
// consecutive.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "edt/status.h"
#include "edt/store.h"

namespace edt::elastic {

using Clock = std::chrono::steady_clock;
using Duration = std::chrono::milliseconds;

struct MemberInfo {
  std::string id;
  std::string host;
  bool operator==(const MemberInfo&) const = default;
};

struct Generation {
  int64_t number = 0;
  bool failure = false;   // formed because a worker failed (else: hosts updated)
  std::string why;        // for failures: what failed
  std::vector<MemberInfo> members;  // in rank order

  // The rank of `id` in this generation, or -1.
  int rank_of(const std::string& id) const;
  std::string encode() const;
  static Result<Generation> decode(int64_t number, const std::string& text);
};

// The store key of generation g's communicator prefix: "gen/<g>/comm".
std::string comm_prefix(int64_t generation);

// Who holds the state a generation starts from.
struct StateSource {
  int rank = 0;
  int64_t commit_id = 0;
};

// ---------------------------------------------------------------------------
// Worker side.

struct MembershipClientOptions {
  std::string id;    // unique in the job, no whitespace (edtrun: EDT_WORKER_ID)
  std::string host;  // the worker's host identity
  Duration heartbeat_interval{1000};
  // How long to poll between checks of `shutdown` and `removed/<id>` while
  // waiting for a generation.
  Duration poll_interval{100};
};

class MembershipClient {
 public:
  // `store` serves the calls of the training thread; `watch_store` (its own
  // connection for a TCP store) serves the background thread, whose waits
  // must not queue behind the training thread's. Both see the same keys.
  MembershipClient(std::shared_ptr<Store> store, std::shared_ptr<Store> watch_store,
                   MembershipClientOptions options);
  ~MembershipClient();  // stops the background thread

  const MembershipClientOptions& options() const { return options_; }

  // Registers the worker and starts the background thread (heartbeats and
  // watching for new generations).
  Status start();

  // Waits until a generation newer than `after` that lists this worker is
  // published, and returns the newest such. kAborted if the job shut down
  // or this worker was removed (the message says which); kTimeout after
  // `timeout`.
  Result<Generation> join(int64_t after, Duration timeout);

  // Announces this worker's last commit id in `gen` and waits for every
  // member's. kHostsUpdated if a newer generation is published meanwhile
  // (join again); kTimeout after `timeout`.
  Result<StateSource> agree_on_source(const Generation& gen, int64_t commit_id, Duration timeout);

  // Records that generation `gen` failed (first report wins).
  void report_broken(int64_t gen, const std::string& why);

  // Records that the job's work is complete (this worker's training
  // function returned in generation `gen`); see the key `done`.
  Status finish(int64_t gen);

  // The newest generation the background thread has seen published (0 if
  // none), and whether one newer than `gen` exists.
  int64_t newest_seen() const { return newest_seen_.load(); }

  // Called on the background thread for every newly published generation
  // (e.g. to abort the current communicator when a worker failed). Set it
  // before start(), or while no generation is being published.
  void on_new_generation(std::function<void(const Generation&)> callback);

 private:
  void watch_loop();
  // kAborted once the job is done or shutting down or this worker was
  // removed; a store's error as it is; OK otherwise.
  Status check_stopped();

  std::shared_ptr<Store> store_;
  std::shared_ptr<Store> watch_store_;
  MembershipClientOptions options_;
  std::atomic<int64_t> newest_seen_{0};
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::function<void(const Generation&)> callback_;  // guarded by mu_
  std::thread watcher_;
};

// ---------------------------------------------------------------------------
// Coordinator side.

struct CoordinatorOptions {
  int min_size = 1;
  int max_size = 1 << 30;
  // A registered worker whose heartbeat does not move for this long is lost.
  Duration heartbeat_timeout{6000};
};

// What one poll() saw and did.
struct PollOutcome {
  std::optional<Generation> published;  // a new generation, if one was formed
  std::vector<std::string> silent;      // workers newly lost for want of heartbeats
  int ready = 0;                        // registered, live workers
  bool below_min = false;               // a generation is needed and fewer than min_size are ready or starting
  bool done = false;                    // the job's work is complete (key `done`): nothing more forms
};

class MembershipCoordinator {
 public:
  MembershipCoordinator(std::shared_ptr<Store> store, CoordinatorOptions options);

  // The launcher started worker `id` on `host`; `host_order` and `slot` give
  // its place in rank order. It joins a generation once it registered.
  void expect(const std::string& id, const std::string& host, int64_t host_order, int slot);
  // The worker's process ended or its host vanished: a failure.
  void lost(const std::string& id, const std::string& why);
  // The worker leaves gracefully (its host was removed from the host list).
  void remove(const std::string& id, const std::string& why);

  // Reads registrations, heartbeats and failure reports, and publishes a new
  // generation when membership must change: at once when a member failed or
  // left; for newcomers, once no expected worker is still starting (so that
  // several hosts added together make one change). Never below min_size,
  // and never once the job's work is done (PollOutcome::done).
  Result<PollOutcome> poll();

  // Ends the job: workers waiting for a generation return kAborted(why).
  Status shutdown(const std::string& why);

  int64_t generation() const { return current_.number; }
  const Generation& current() const { return current_; }
  // Workers expected but not registered yet.
  int starting() const;
  // Whether expected worker `id` has registered.
  bool registered(const std::string& id) const;

 private:
  struct Worker {
    std::string host;
    int64_t host_order = 0;
    int slot = 0;
    bool registered = false;
    std::optional<std::string> heartbeat;  // last value seen
    Clock::time_point heard;               // when it last moved
  };
  Status publish(std::vector<MemberInfo> members, bool failure, const std::string& why);

  std::shared_ptr<Store> store_;
  CoordinatorOptions options_;
  std::map<std::string, Worker> workers_;  // live (expected or registered)
  std::vector<std::string> failures_;      // why members were lost since the last generation
  bool member_left_ = false;               // a member was removed since the last generation
  Generation current_;
};

}  // namespace edt::elastic
