// Elastic training: state that survives membership changes, and a sampler
// that trains every sample of an epoch exactly once whatever the resizes.
//
// The model (docs/elastic.md tells it to users):
// - A job runs as a sequence of membership generations. Each generation has
//   a fixed set of workers and its own communicator; a change of membership
//   (hosts added or removed, a worker failed) forms a new generation.
// - A worker keeps its training state in registered StateObjects. commit()
//   saves a copy of every object in memory (as bytes, or as the object's
//   own copy, see StateObject::commit); a failure rolls every survivor
//   back to the last commit. Workers learn of membership changes at commit
//   points, or at once when a collective fails because a peer died.
// - Survivors keep their process and their memory across generations. A
//   worker that joins receives the committed state from the members with
//   the most recent commit, a disjoint slice from each, all at once.
//
// ElasticSampler is a StateObject: it records which samples of the epoch
// the job has processed, and on every reset re-partitions the samples not
// yet processed (as of the restored commit) across the new workers.
//
// Errors: run() tells the two reasons to reset apart by code. kHostsUpdated:
// the membership changed and the state was committed (nothing is lost).
// kPeerFailed (or kTimeout/kAborted from a collective): a worker failed and
// the survivors rolled back to the last commit. Any other error from the
// training function ends run() with that error.
//
// Thread safety: State and ElasticSampler are owned by one training thread;
// their methods must not be called concurrently (State's background thread
// only heartbeats, watches for new generations and, when a worker failed,
// aborts the communicator so that a blocked collective returns).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "edt/communicator.h"
#include "edt/status.h"
#include "edt/store.h"

namespace edt::elastic {

// A piece of training state that elastic training saves at commit(),
// restores on rollback and sends to workers that join. Implement it for
// anything that must survive a reset: model parameters, optimizer state,
// the epoch and batch counters, a sampler.
class StateObject {
 public:
  virtual ~StateObject() = default;

  // The object's current value as bytes. Called at commit() and when the
  // state is sent to newcomers.
  virtual std::string serialize() const = 0;

  // Replaces the object's value with bytes made by serialize() (possibly on
  // another worker). Malformed bytes return kInvalidArgument and leave the
  // object unchanged.
  virtual Status deserialize(std::string_view bytes) = 0;

  // Called after every membership change, once the state of the new
  // generation is in place, with this worker's new rank and the new size.
  virtual void on_reset(int /*rank*/, int /*size*/) {}

  // Optional: an object that keeps its committed value itself, cheaper
  // than as bytes (a training state whose tensors are copied into buffers
  // kept from the previous commit), overrides these three. commit() copies
  // the current value and returns true; State then keeps no bytes of the
  // object, calls restore() to go back to that copy and committed_bytes()
  // (bytes deserialize() accepts) only when the committed value moves to
  // another worker. The default, false: State keeps serialize()'s bytes.
  virtual bool commit() { return false; }
  virtual Status restore() { return Status::ok(); }
  virtual std::string committed_bytes() const { return serialize(); }
  // Optional, with commit(): the committed bytes without a copy, as
  // pieces lent where they lie (one buffer, or a header and then each
  // tensor's), sent one after the other as committed_bytes() would be;
  // valid until the next commit() or restore(). Empty when the object has
  // none to lend (then committed_bytes() is called). A large state sends
  // its slices straight from there.
  virtual std::vector<std::string_view> committed_views() const { return {}; }

  // Optional: deserialize() from bytes that the object may keep using
  // after it returns (its values read in place, no copy): `owner` keeps
  // them alive for as long as the object holds a copy of it. The default
  // copies nothing either and does not keep them.
  virtual Status deserialize_shared(const std::shared_ptr<const void>& /*owner*/, std::string_view bytes) {
    return deserialize(bytes);
  }
};

// What the last reset moved to or from this worker: nothing when every
// member already held the newest commit (bytes 0).
struct TransferStats {
  int64_t commit_id = 0;                  // the commit that moved
  int64_t bytes = 0;                      // the committed state's size
  std::vector<int64_t> bytes_from_rank;   // a receiver's bytes from each rank of the generation
  int64_t bytes_sent = 0;                 // a holder's bytes sent, to all receivers
  double seconds = 0;                     // this worker's transfer, first request to last byte
};

struct ElasticSamplerOptions {
  uint64_t num_samples = 0;  // samples in the data set: indices 0 .. num_samples-1
  uint64_t seed = 0;         // the permutation of epoch e depends on (seed, e) only
  bool shuffle = true;       // false: the samples in index order
};

// Splits the samples of an epoch among the workers of the current
// generation, and tracks what the job has processed.
//
// Workers train in lockstep: at every step each worker takes batch(b) and,
// once the step is done (its allreduce completed), calls record_batch(b)
// with the same b on every worker. Because the partition is a function of
// the state every worker shares (the processed samples as of the last
// reset, the rank and the size), each worker knows what every other worker
// processed without communicating, and serialize() captures the processed
// samples of the whole job, not only this worker's.
//
// The partition: the samples of the epoch's permutation not yet processed
// (the "remaining" samples, in permutation order) are dealt round-robin:
// worker r of n gets remaining[r], remaining[r + n], ... Shards differ in
// size by at most one; at the last step of an epoch some workers may get a
// batch shorter than b, or empty. Samples are never padded or repeated.
class ElasticSampler final : public StateObject {
 public:
  // Starts at epoch 0, as worker 0 of 1.
  explicit ElasticSampler(const ElasticSamplerOptions& options);

  // Starts epoch `epoch`: nothing of it is processed yet. The epoch the
  // sampler is already in keeps its progress, so a training loop that
  // calls set_epoch(e) at the start of every epoch (as Horovod's examples
  // do) and is re-entered after a reset mid-epoch goes on with what is
  // left of e instead of training it again.
  void set_epoch(uint64_t epoch);

  // Re-partitions the samples not yet processed across `size` workers, this
  // one being `rank`. Called by State after every membership change and
  // rollback (through on_reset), and by the user at the start.
  // Requires 0 <= rank < size.
  void reset(int rank, int size);

  // This worker's next batch: up to `batch_size` sample indices, empty once
  // its shard of the epoch is done. Does not change the sampler.
  std::vector<uint64_t> batch(uint64_t batch_size) const;

  // Every worker has processed its batch(batch_size).
  void record_batch(uint64_t batch_size);

  // Steps of `batch_size` per worker still needed to finish the epoch
  // (the same on every worker).
  uint64_t steps_left(uint64_t batch_size) const;

  // True when every sample of the epoch is processed.
  bool epoch_done() const { return cursor_ >= shard_size(0); }

  uint64_t epoch() const { return epoch_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const ElasticSamplerOptions& options() const { return options_; }

  // Samples of the epoch processed by the whole job, and still to process.
  uint64_t processed_count() const;
  uint64_t remaining_count() const { return options_.num_samples - processed_count(); }

  // This worker's whole shard of the remaining samples as of the last reset
  // (what it processes from the reset to the end of the epoch).
  std::vector<uint64_t> shard() const;

  // StateObject: the epoch and the set of processed samples of the job.
  // deserialize() refuses bytes made for another data set (a different
  // num_samples, seed or shuffle) and re-partitions with the current rank
  // and size; on_reset() calls reset().
  std::string serialize() const override;
  Status deserialize(std::string_view bytes) override;
  void on_reset(int rank, int size) override { reset(rank, size); }

 private:
  // The processed samples of the job now, as a bitmap over sample indices.
  std::vector<bool> processed_now() const;
  void repartition();  // remaining_ from processed_, cursor_ = 0
  void start_epoch(uint64_t epoch);  // nothing of `epoch` processed
  uint64_t shard_size(int rank) const;

  ElasticSamplerOptions options_;
  uint64_t epoch_ = 0;
  int rank_ = 0;
  int size_ = 1;
  std::vector<uint64_t> permutation_;  // of epoch_
  std::vector<bool> processed_;        // as of the last reset
  std::vector<uint64_t> remaining_;    // as of the last reset, permutation order
  uint64_t cursor_ = 0;                // samples per worker processed since the last reset
};

// A worker's place in a generation: its rank and every member's host, in
// rank order (so its local and cross ranks too).
struct Placement {
  int64_t generation = 0;
  int rank = 0;
  std::vector<std::string> hosts;
};

struct StateOptions {
  // The rendezvous store (in edtrun: the TCP store at EDT_COORDINATOR), and a
  // second handle to it for the background thread (its own connection for
  // a TCP store; the same object for a MemoryStore).
  std::shared_ptr<Store> store;
  std::shared_ptr<Store> watch_store;
  std::string worker_id;   // unique in the job (EDT_WORKER_ID)
  std::string host;        // host identity (EDT_HOSTNAME); equal hosts share memory
  std::string transport = "auto";  // CommunicatorOptions::transport (EDT_TRANSPORT)
  // How long a collective waits for a silent peer (EDT_TIMEOUT).
  std::chrono::milliseconds collective_timeout{30000};
  std::chrono::microseconds spin{-1};  // CommunicatorOptions::spin (EDT_SPIN_TIME)
  // How long a worker waits for a generation that includes it
  // (EDT_ELASTIC_TIMEOUT; edtrun passes --elastic-timeout).
  std::chrono::milliseconds elastic_timeout{600000};
  std::chrono::milliseconds heartbeat_interval{1000};
};

// The training state of one worker and its place in the job.
//
// Register the StateObjects first, then call run(). commit() saves every
// object (in memory) and checks for membership changes; restore() puts the
// last commit back. A worker's first commit id is 0 (the state it starts
// with); every commit adds one, and the state of a new generation comes from
// the member with the highest commit id.
class State {
 public:
  // From edtrun's elastic environment: EDT_COORDINATOR, EDT_WORKER_ID,
  // EDT_HOSTNAME, EDT_TRANSPORT, EDT_TIMEOUT, EDT_ELASTIC_TIMEOUT. A missing
  // variable is kInvalidArgument naming it (the program was not started by
  // edtrun in elastic mode).
  static Result<std::unique_ptr<State>> from_env();
  static Result<std::unique_ptr<State>> create(StateOptions options);
  ~State();

  // Registers `object` (not owned; it must outlive the State) under `name`.
  // Every worker must register the same names in the same order.
  void add(const std::string& name, StateObject* object);
  // `callback` runs after every membership change, once the new state is
  // in place (after the StateObjects' on_reset).
  void on_reset(std::function<void()> callback);

  // Saves every object as the new commit, then check_host_updates().
  Status commit();
  // commit() without check_host_updates(): for callers whose communicator
  // is driven by another thread (edt.torch's engine); they agree on
  // membership_changed() through that thread's collectives instead.
  void save();
  // This worker's own view: a generation newer than its own was announced.
  // Ranks may see it at different moments; check_host_updates() agrees.
  bool membership_changed() const;
  // Puts the last commit back into every object.
  Status restore();
  // kHostsUpdated if a new generation was announced, on every rank alike
  // (rank 0's view is broadcast, so all ranks leave at the same step), after
  // committing that step as commit() would; OK otherwise. A collective: every
  // rank must call it. Cheaper than commit() when nothing changed, so a loop
  // may check every step and commit less often.
  Status check_host_updates();

  // The communicator of the current generation (valid inside run()).
  Communicator& comm();
  int rank() const;
  int size() const;
  int64_t generation() const;
  int64_t commit_id() const;
  // Resets this worker went through (generations it joined after its first).
  int resets() const;
  // The state transfer of the last reset (see TransferStats).
  const TransferStats& last_transfer() const;

  // This worker's place in the job: inside run() that of the current
  // generation; between generations that of the last one; before run()
  // that of the first generation that lists this worker, waiting for it
  // (up to the elastic timeout) as Horovod's init() waits for its first
  // rendezvous. kAborted when the job ended or this worker left it
  // (left_the_job() says which), kTimeout when no generation took it in.
  Result<Placement> placement();

 private:
  friend Status run(State& state, const std::function<Status(State&)>& fn);
  struct Impl;
  explicit State(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Runs `fn` until it returns OK, through membership changes: joins the next
// generation (a new communicator; newcomers receive the committed state from
// the members with the most recent commit, a slice from each), calls the
// reset callbacks and calls `fn` again. After kHostsUpdated the state is kept as committed;
// after a failure of a collective (kPeerFailed, kTimeout, kAborted) every
// survivor rolls back to its last commit first. When `fn` returns OK the
// job's work is complete, and that is recorded with the job's state: no
// generation forms after it, and a worker that arrives later ends at once
// instead of training again. Returns OK when `fn` does, the first other
// error of `fn`, kAborted if the job shut down, this worker was removed
// (its host left the host list) or the job's work was complete before this
// worker joined, or kTimeout if no generation took it in within the
// elastic timeout.
Status run(State& state, const std::function<Status(State&)>& fn);

// True if `status` (from run() or placement()) means this worker left the
// job on purpose (its host was removed, or the job's work was complete
// before it joined), which is a clean end for a worker.
bool left_the_job(const Status& status);

// The permutation of 0 .. n-1 for (seed, epoch): the same on every worker,
// machine and build (it uses its own generator, not the standard library's
// unspecified distributions).
std::vector<uint64_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch);

}  // namespace edt::elastic
