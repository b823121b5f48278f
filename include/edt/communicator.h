// Communicator: a fixed group of ranks and the collectives they run together.
//
// A communicator belongs to one membership generation: it is made once from a
// Store (a PrefixStore per generation, so generations never see each other's
// keys), all ranks of the group call create() with the same size, and its
// membership never changes. A new membership is a new communicator.
//
// Ranks on one host (equal CommunicatorOptions::host) talk over shared
// memory, ranks on different hosts over TCP; a job spanning both runs
// hierarchical algorithms (inside each host over shared memory, across hosts
// over TCP). Ranks of one host must be consecutive, as edtrun assigns them.
//
// Collectives. Every rank must call the same collectives in the same order
// with matching arguments. Each call first exchanges a small descriptor
// (kind, dtype, op, counts, root, sequence number): a mismatch returns
// kInvalidArgument on every rank, naming both sides, and moves no data; the
// communicator stays usable. Counts are in elements; any count works (0, 1,
// primes, not divisible by size). send == recv means in place. Buffers belong
// to the caller and must stay valid until the call (or its Work) completes.
//
// Failures. A peer that dies (its process ends, its connection resets)
// makes the running op return kPeerFailed naming the rank and host within
// about two seconds; a peer that is silent for options.timeout gives
// kTimeout. After either, the communicator is broken: every later op returns
// the same error at once, and its peers fail too rather than wait. abort()
// breaks it on purpose (kAborted); the elastic layer calls it when membership
// changes.
//
// Threads. Blocking calls may come from any thread; ops run one at a time in
// the order they were submitted, blocking or async. Async ops run on one
// background thread per communicator. Work handles may be waited on from any
// thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "edt/status.h"
#include "edt/store.h"
#include "edt/types.h"

namespace edt {

struct CommunicatorOptions {
  int rank = -1;
  int size = 0;
  // Host identity: ranks with equal host share memory. Empty: gethostname().
  std::string host{};
  // "auto" (shm inside a host, TCP across), "tcp" (TCP everywhere) or "shm"
  // (every rank must be on one host).
  std::string transport = "auto";
  // How long a collective waits for a silent peer, and how long create()
  // waits for every rank to arrive.
  std::chrono::milliseconds timeout{30000};
  // How long a thread waiting in a collective spins (pausing for up to
  // 50 us, then yielding its core) before it blocks. Negative: 5 ms where
  // this host's ranks have a core each, 2 us where they share cores (see
  // spin_from_env for EDT_SPIN_TIME).
  std::chrono::microseconds spin{-1};
  // Address the TCP transport listens on and tells its peers. Empty: the
  // host identity when it is an IP address, else this host's name resolved
  // (falling back to 127.0.0.1).
  std::string bind_address{};
};

// CommunicatorOptions::spin from EDT_SPIN_TIME: milliseconds (0.05 is
// 50 us), or "auto" or unset for the default.
Result<std::chrono::microseconds> spin_from_env();

// An op submitted with an _async call.
class Work {
 public:
  virtual ~Work() = default;
  // The op's result; kTimeout if it has not finished within `timeout` (the
  // op keeps running; wait again).
  virtual Status wait(std::chrono::milliseconds timeout = std::chrono::hours(24 * 365)) = 0;
  virtual bool is_completed() const = 0;
};

class Communicator {
 public:
  // Forms the group: every rank of options.size calls this with its own rank.
  // Returns once all have connected, or kTimeout naming who did not arrive.
  static Result<std::shared_ptr<Communicator>> create(std::shared_ptr<Store> store,
                                                      const CommunicatorOptions& options);

  // From the environment edtrun sets: EDT_RANK, EDT_SIZE, EDT_COORDINATOR
  // (host:port of the TCP store), EDT_HOSTNAME (host identity; default
  // gethostname), EDT_TRANSPORT (auto|tcp|shm), EDT_TIMEOUT (e.g. 30s),
  // EDT_SPIN_TIME and EDT_GENERATION (the store prefix; default "0").
  static Result<std::shared_ptr<Communicator>> from_env();

  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;   // index among the ranks of this host
  virtual int local_size() const = 0;   // ranks on this host
  // As Horovod counts them: among the hosts that have a rank with this
  // rank's local_rank, the index of this rank's host, and how many there
  // are. With the same number of ranks on every host: the host's index and
  // the number of hosts. Hosts are ordered by their lowest rank.
  virtual int cross_rank() const = 0;
  virtual int cross_size() const = 0;
  virtual const std::string& host() const = 0;
  // "shm", "tcp" or "shm+tcp": what this communicator's ranks talk over.
  virtual std::string transport_name() const = 0;

  // recv[i] = op over ranks of send[i], for i < count. In place if send == recv.
  virtual Status allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) = 0;
  // Every rank's buf becomes root's buf.
  virtual Status broadcast(void* buf, size_t count, DataType type, int root) = 0;
  // recv (size * count elements) = every rank's send, in rank order.
  virtual Status allgather(const void* send, void* recv, size_t count, DataType type) = 0;
  // recv = every rank's send in rank order; rank r sends recv_counts[r]
  // elements (recv_counts has size() entries, equal on every rank).
  virtual Status allgatherv(const void* send, void* recv, const std::vector<size_t>& recv_counts,
                            DataType type) = 0;
  // send has size * recv_count elements; recv (recv_count) = op over ranks of
  // the block of send that belongs to this rank.
  virtual Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) = 0;
  // send and recv have size * count elements; block j of send goes to rank j,
  // block i of recv came from rank i.
  virtual Status alltoall(const void* send, void* recv, size_t count, DataType type) = 0;
  virtual Status barrier() = 0;

  virtual std::shared_ptr<Work> allreduce_async(const void* send, void* recv, size_t count, DataType type,
                                                ReduceOp op) = 0;
  virtual std::shared_ptr<Work> broadcast_async(void* buf, size_t count, DataType type, int root) = 0;
  virtual std::shared_ptr<Work> allgather_async(const void* send, void* recv, size_t count, DataType type) = 0;
  virtual std::shared_ptr<Work> allgatherv_async(const void* send, void* recv, std::vector<size_t> recv_counts,
                                                 DataType type) = 0;
  virtual std::shared_ptr<Work> reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                                     DataType type, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> alltoall_async(const void* send, void* recv, size_t count, DataType type) = 0;
  virtual std::shared_ptr<Work> barrier_async() = 0;

  // Forms a communicator over some of this one's ranks (a process set):
  // `members` lists them in ascending order and includes this rank; rank r
  // of the new communicator is members[r]. Every member calls it with the
  // same members and the same `scope`, the others do not; the members meet
  // through this communicator's store under "subgroup/<scope>", so a scope
  // names one subgroup for the life of this communicator (never reuse one).
  // Returns once all members have connected (kTimeout naming who did not
  // arrive), kInvalidArgument for a bad member list. The new communicator
  // has this one's host identity, transport choice and timeouts; its ops
  // and failures are its own (it may outlive this one).
  virtual Result<std::shared_ptr<Communicator>> create_subgroup(const std::vector<int>& members,
                                                                const std::string& scope) = 0;

  // Breaks the communicator on purpose: the running op and every queued or
  // later one return kAborted, and peers stop waiting for this rank. Safe
  // from any thread, any number of times.
  virtual void abort() = 0;
};

}  // namespace edt
