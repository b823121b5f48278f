// Engine: the background thread behind edt.torch, as Horovod has one.
//
// Callers submit named requests (allreduce, allgather, broadcast, alltoall,
// reducescatter, barrier, join) from any thread and get a handle back; the
// engine's thread negotiates with the other ranks (see negotiation.h), so
// ranks may submit in different orders, runs what every rank submitted,
// fusing small allreduces into one buffer up to the fusion threshold, and
// completes the handles. One cycle runs every `cycle_time` while requests
// are pending on some rank, every `idle_time` while none are, and
// `request_delay` (by default at once) after a request arrives while the
// thread waits. A thread that waits for a request (wait()) does not sleep
// until the background thread gets a core: it runs the cycles itself until
// its request is done.
//
// Buffers: the caller's buffer of an allreduce or broadcast is reduced or
// overwritten in place; allgather, alltoall and reducescatter write a new
// buffer the engine allocates (Output). The caller keeps its buffer alive
// and untouched until wait() returns.
//
// Errors: a request whose ranks disagree fails on every rank with a message
// naming both sides; the engine keeps running. A failing collective (a peer
// died, the communicator was aborted) fails every request, pending and
// future, with that Status: the engine is then broken and must be replaced.
//
// Thread safety: every public method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "edt/status.h"
#include "engine/collective_backend.h"
#include "engine/negotiation.h"

namespace edt::engine {

struct EngineOptions {
  uint64_t fusion_threshold = 128ull << 20;           // bytes; 0 disables fusion
  std::chrono::microseconds cycle_time{1000};         // pause between cycles while requests are pending
  // Pause between cycles while no rank has anything pending: a request
  // submitted here ends it (after request_delay).
  std::chrono::microseconds idle_time{25000};
  // How long a new request waits for a thread that waits for it (which
  // runs the cycle at once) before the background thread cycles for it.
  // 0: at once, so requests are reduced while the caller goes on (the
  // gradients of a backward pass while the pass runs). Where every core
  // runs a training process the background thread has no core of its own:
  // waking it costs the training more than the overlap gains.
  std::chrono::microseconds request_delay{0};
  size_t cache_capacity = 1024;                       // names in the response cache
  std::chrono::milliseconds stall_warning{60000};     // warn about names some ranks never sent
};

// Options from HOROVOD_FUSION_THRESHOLD or EDT_FUSION_THRESHOLD (bytes, or a
// size such as 64M), HOROVOD_CYCLE_TIME (milliseconds, fractions allowed),
// EDT_IDLE_CYCLE_TIME (the same for idle_time), EDT_REQUEST_DELAY (the same
// for request_delay, or "auto", the default: idle_time when
// `local_processes`, the job's processes on this host, are at least the
// cores this process may run on, else 0), HOROVOD_CACHE_CAPACITY and
// HOROVOD_STALL_CHECK_TIME_SECONDS. A malformed value is an error naming
// the variable.
Result<EngineOptions> engine_options_from_env(int local_processes = 1);

// What a finished request produced besides its in-place buffer.
struct Output {
  std::vector<uint8_t> data;          // allgather, alltoall, reducescatter
  std::vector<int64_t> shape;         // of `data`
  std::vector<int64_t> recv_splits;   // alltoall: rows received from each rank
  int last_joined_rank = -1;          // join
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> start(std::unique_ptr<CollectiveBackend> collectives,
                                               const EngineOptions& options);
  ~Engine();  // shuts down (see shutdown()) if still running

  int rank() const { return rank_; }
  int size() const { return size_; }
  const EngineOptions& options() const { return options_; }

  // Submits a request; `data` is its buffer (see above). Fails at once when
  // the name is already in flight, the request is malformed, or the engine
  // is shut down or broken.
  Result<int64_t> submit(const std::string& name, const Meta& meta, void* data);

  // Announces that this rank has no more requests until every rank joined;
  // its handle completes with the rank that joined last.
  Result<int64_t> submit_join();

  // True when the handle's request finished (successfully or not).
  Result<bool> poll(int64_t handle);

  // Waits for the request and forgets the handle.
  Status wait(int64_t handle, Output* output);

  // Ends the engine of every rank, as Horovod's shutdown does: the cycle
  // that announces it to the others is the last of all of them, so it waits
  // for one exchange, not for the others to call shutdown() (a rank that
  // leaves early, after an exception, must not wait for ranks that wait
  // for it). Requests that needed this rank fail on the others, and so does
  // what they submit later, naming the rank. Idempotent. Returns the error
  // that broke the engine, if any.
  Status shutdown();

  // Whether cycling ended because some rank (this one or another) shut
  // down, not because a collective failed. Only a new engine runs
  // collectives then.
  bool ended();

  // Number of fused buffers reduced so far (for tests and benchmarks).
  uint64_t fused_batches() const { return fused_batches_.load(); }

 private:
  struct Op;
  Engine(std::unique_ptr<CollectiveBackend> collectives, const EngineOptions& options);
  void loop();
  // Runs one cycle; false once cycling has stopped (some rank shut down,
  // or a collective failed). The caller holds cycle_mu_.
  bool run_cycle();
  // Runs cycles on the calling thread until `op` is done or cycling stops.
  void drive_until_done(const Op& op);
  Status cycle(bool* finished);
  // cycle()'s steps: takes the queue and the join and shutdown to announce;
  // exchanges every rank's message (none when all are empty); records a
  // completed join and says whether a rank shut down; warns of names that
  // stall (rank 0); sets the pause before the next cycle.
  void take_announcements(std::vector<Announcement>* announcements, bool* join, bool* shut_down);
  Result<std::optional<CycleOutcome>> exchange(const std::string& message);
  bool apply_outcome(const CycleOutcome& outcome);
  void warn_of_stalls();
  void schedule_next_cycle();
  // The thread's wait between cycles (see schedule_next_cycle()).
  void pause();
  Status run_ready(const std::vector<Ready>& ready);
  Status run_allreduce_group(const std::vector<const Ready*>& group);
  Status run_one(const Ready& ready);
  void complete(const std::string& name, Status status, Output output);
  void fail_everything(const Status& status);
  Status ended_error() const;  // why submit() refuses once ended; needs mu_

  std::unique_ptr<CollectiveBackend> collectives_;
  const EngineOptions options_;
  const int rank_;
  const int size_;

  std::mutex mu_;
  std::condition_variable wake_;       // a request arrived or shutdown was asked
  std::condition_variable finished_;   // some handle finished
  std::deque<std::pair<std::string, std::shared_ptr<Op>>> queue_;  // guarded by mu_
  std::unordered_map<std::string, std::shared_ptr<Op>> in_flight_;  // by name; guarded by mu_
  std::unordered_map<int64_t, std::shared_ptr<Op>> handles_;        // guarded by mu_
  int64_t next_handle_ = 1;             // guarded by mu_
  bool join_asked_ = false;             // guarded by mu_
  std::shared_ptr<Op> join_op_;         // guarded by mu_
  bool shutdown_asked_ = false;         // guarded by mu_
  std::chrono::steady_clock::time_point first_queued_;  // of the oldest request in queue_; guarded by mu_
  bool join_announced_ = false;         // written under mu_ and cycle_mu_
  bool shutdown_announced_ = false;     // written under mu_ and cycle_mu_
  std::chrono::steady_clock::time_point next_cycle_;    // when the thread cycles next; guarded by mu_
  // Until when the thread sleeps in pause() (min() while it does not): a
  // change that brings its deadline before this wakes it. Guarded by mu_.
  std::chrono::steady_clock::time_point sleeping_until_ = std::chrono::steady_clock::time_point::min();
  bool stopped_ = false;                // guarded by mu_
  int shut_down_by_ = -1;               // the rank whose shutdown ended it; guarded by mu_
  Status broken_;                       // guarded by mu_

  // Cycles run on the background thread, or on a thread that waits for a
  // request (wait()), one at a time: the state below belongs to whichever
  // thread holds cycle_mu_.
  std::mutex cycle_mu_;
  bool cycling_stopped_ = false;
  Negotiator negotiator_;
  std::vector<uint8_t> fusion_buffer_;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> stall_seen_;
  std::atomic<uint64_t> fused_batches_{0};

  std::mutex thread_mu_;  // two threads must not join thread_ at once
  std::thread thread_;
};

}  // namespace edt::engine
