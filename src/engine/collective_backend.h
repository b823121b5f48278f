// CollectiveBackend: the interface the engine runs its collectives through,
// the narrow view of a communicator that it needs.
//
// The engine runs one call at a time (its cycles hold a lock), from its
// background thread or from a thread waiting for a request, in the same
// order on every rank (negotiation makes it so), so implementations need not
// be thread-safe, nor keep state per thread. Buffers are raw bytes described by the caller; a call
// returns a non-OK Status when a peer failed or the group was aborted, and
// the engine then fails every pending request with that Status.
//
// Implementations: CommunicatorCollectives (libedt's Communicator, the real
// one) and ThreadCollectives (ranks as threads of one process, for tests).
#pragma once

#include <cstddef>
#include <vector>

#include "edt/status.h"
#include "engine/request.h"

namespace edt::engine {

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Reduces `count` elements of `buffer` across ranks, in place; kAverage
  // divides the sum by size().
  virtual Status allreduce(void* buffer, size_t count, DataType dtype, ReduceOp op) = 0;

  // `in` holds one block per rank, consecutive in rank order, block r of
  // counts[r] elements; rank r receives into `out` the reduction of every
  // rank's block r. Counts are the same on every rank. kAverage is never
  // passed (the engine sums and scales).
  virtual Status reduce_scatter(const void* in, void* out, const std::vector<size_t>& counts, DataType dtype,
                                ReduceOp op) = 0;

  // Concatenates every rank's `bytes[r]` bytes, in rank order, into `out`
  // (sum of bytes). `in` holds bytes[rank()] bytes.
  virtual Status allgatherv(const void* in, void* out, const std::vector<size_t>& bytes) = 0;

  // Copies `bytes` bytes of `buffer` on `root` into `buffer` on every rank.
  virtual Status broadcast(void* buffer, size_t bytes, int root) = 0;

  // Rank r sends send_bytes[d] bytes (consecutive in `in`, by destination)
  // to each rank d and receives recv_bytes[s] bytes from each rank s into
  // `out`, in source order.
  virtual Status alltoallv(const void* in, const std::vector<size_t>& send_bytes, void* out,
                           const std::vector<size_t>& recv_bytes) = 0;

  virtual Status barrier() = 0;
};

}  // namespace edt::engine
