// The transport interface: what collective algorithms see of the network.
//
// Terms. A Transport is one rank's view of a fixed group: its rank, the size,
// every rank's host, and a Channel to each peer. A Channel is a reliable,
// ordered, non-blocking byte stream to one peer (a TCP socket, or a pair of
// ring buffers in shared memory). Algorithms never touch channels directly:
// they hand exchange() a batch of Sends and Recvs and it moves all of them
// concurrently (full duplex), so a ring step that sends to the next rank
// while receiving from the previous cannot deadlock on full buffers. A Recv
// may reduce what arrives into its buffer instead of copying it, so data is
// combined while it streams in and never takes an extra copy (the other
// operand may come from a second buffer, so out-of-place collectives need no
// copy of their input either).
//
// Several Sends to one peer in a batch go out in batch order; several Recvs
// from one peer are filled in batch order. Messages have no framing: both
// sides must agree on sizes (the descriptors exchanged before each
// collective guarantee that).
//
// Failure. exchange() fails with kPeerFailed when a peer's process is gone or
// its connection drops (checked about every 100 ms while waiting), kTimeout
// when no byte moved for `timeout`, kAborted after abort(). Any failure
// breaks the transport: every channel is poisoned so that peers fail fast
// instead of waiting, and every later exchange() returns the first error.
//
// Threads: one op at a time (the communicator serialises them), except that
// two threads may run exchange() at once over disjoint channels when at
// most one of them uses memory channels (this rank's doorbell has one
// waiter): the pipelined hierarchical allreduce moves pieces across hosts
// on one thread while the other works inside the host. abort() and broken()
// may be called from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/process.h"
#include "edt/status.h"
#include "edt/types.h"
#include "transport/backoff.h"
#include "transport/doorbell.h"

namespace edt::transport {

using Clock = std::chrono::steady_clock;

class Channel {
 public:
  virtual ~Channel() = default;
  // Takes up to n bytes into the stream; returns how many (0: no room now).
  virtual Result<size_t> try_send(const uint8_t* data, size_t n) = 0;
  // Bytes that have arrived and are not consumed yet, as one contiguous piece
  // (possibly empty).
  virtual Result<std::span<const uint8_t>> peek() = 0;
  virtual void consume(size_t n) = 0;
  // Copies up to n arrived bytes into dst; returns how many. A channel may
  // override this to skip its staging buffer.
  virtual Result<size_t> try_recv(uint8_t* dst, size_t n);
  // A socket to poll while idle, or -1 (memory channels are spun on).
  virtual int fd() const { return -1; }

  // Channels with a sending thread of their own (TCP) take large messages
  // whole: post_send() hands one to that thread, which copies it into the
  // kernel while the caller receives and reduces (full duplex on two cores).
  // The caller keeps `data` valid and unchanged, and posts nothing else,
  // until posted_sent() reports all n bytes.
  virtual bool posts_sends() const { return false; }
  virtual void post_send(const uint8_t* /*data*/, size_t /*n*/) {}
  // Bytes of the posted message sent so far (n once the thread is done with
  // it), or the error that stopped it.
  virtual Result<size_t> posted_sent() { return size_t{0}; }
  // Becomes readable when posted_sent() has news; -1 without a thread.
  virtual int posted_fd() const { return -1; }
  // kPeerFailed if the peer is known to be gone; called while waiting.
  virtual Status check_peer() = 0;
  // Makes the peer's waits on this channel fail.
  virtual void poison() = 0;
};

struct Send {
  int peer;
  const void* data;
  size_t bytes;
};

struct Recv {
  int peer;
  void* data;
  size_t bytes;
  // When set, arriving elements are combined into data (data = data op in,
  // or data = with op in when `with` is set).
  bool reduce = false;
  DataType type = DataType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
  const void* with = nullptr;  // bytes long; may equal data
};

// A rank as the others know it: the host it says it is on (ranks with one
// host identity share memory), where its TCP listener is, and its process.
struct PeerInfo {
  std::string host;
  std::string address;  // host:port
  proc::ProcessId process;
};

class Transport {
 public:
  // `spin`: how long a wait spins (pausing, then yielding) before it
  // blocks (see backoff.h).
  // `doorbell`: this rank's, rung by the peers behind memory channels (null
  // without any); waits on memory block on it after spinning.
  Transport(int rank, std::vector<PeerInfo> peers, std::vector<std::unique_ptr<Channel>> channels,
            std::chrono::milliseconds timeout, std::chrono::nanoseconds spin, Doorbell* doorbell = nullptr);

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }
  const std::string& host(int rank) const { return peers_[rank].host; }
  // "rank 3 (host b)": how errors name a peer.
  std::string describe(int rank) const;

  Status exchange(std::span<const Send> sends, std::span<Recv> recvs);
  Status exchange(std::initializer_list<Send> sends, std::initializer_list<Recv> recvs);

  // Breaks the transport with `why` (the first reason wins) and poisons every
  // channel. Returns the error now recorded.
  Status fail(Status why);
  void abort();
  // The error that broke the transport, or OK.
  Status broken() const;
  bool is_broken() const { return broken_flag_.load(std::memory_order_acquire); }

  // Waits for `ready` (a cheap check polled in a spin, then yield, then sleep
  // loop) with the same abort, peer and timeout checks as exchange().
  // `peers` are the ranks whose liveness to check; `what` names the wait.
  template <typename Ready>
  Status wait_until(Ready&& ready, std::span<const int> peers, const char* what);

  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  class Exchange;  // one exchange() in progress (transport.cc)

  Status check_waiting(std::span<const int> peers, Clock::time_point last_progress, const char* what);

  int rank_;
  std::vector<PeerInfo> peers_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::chrono::milliseconds timeout_;
  std::chrono::nanoseconds spin_;
  Doorbell* doorbell_;
  std::atomic<bool> broken_flag_{false};
  mutable std::mutex mu_;
  Status broken_;  // guarded by mu_
};

template <typename Ready>
Status Transport::wait_until(Ready&& ready, std::span<const int> peers, const char* what) {
  Backoff backoff(spin_, doorbell_);
  const auto start = Clock::now();
  for (;;) {
    if (is_broken()) return broken();
    if (ready()) return Status::ok();
    backoff.idle();
    if (backoff.slow_check_due()) {
      Status s = check_waiting(peers, start, what);
      if (!s.is_ok()) return fail(s);
    }
  }
}

}  // namespace edt::transport
