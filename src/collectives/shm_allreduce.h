// Allreduce among the ranks of one host through their shared segment.
//
// Every local rank owns a step flag (a counter on its own cache line) and
// three slot buffers. A *round* is: write what the others must see, raise the
// own flag to the next step number, wait until every flag has reached it. A
// rank raises its flag only after it has finished reading everything it read
// after the previous round, so once a rank has seen all flags at step s,
// nobody still reads what was read between steps s-2 and s-1.
//
// Small buffers (one round): each rank copies its data into its slot, then
// every rank reduces all slots in local-rank order straight into its output.
//
// Large buffers go in chunks of one slot, software-pipelined so that each
// chunk costs one round. A chunk is cut into one slice per local rank; local
// rank i owns slice i. Before round k a rank has copied the slices of chunk k
// that the others own into its slot buffer k % 3, and has reduced its own
// slice of chunk k-1 into the same place of its slot buffer (k-1) % 3; after
// round k it copies every rank's reduced slice of chunk k-1 out to its
// output, then reduces its own slice of chunk k: the own input and slice i
// of every other rank's slot, in local-rank order, into slice i of its own
// slot. Three buffers make the reuse safe: chunk k+3 overwrites buffer k % 3
// only after round k+2, which nobody enters before finishing the copy-out of
// chunk k (after round k+1). Each chunk stays in cache between copy in,
// reduction and copy out, the reduction work is split evenly, the own slice
// is never copied in, and a chunk costs one synchronisation.
//
// A round may also carry a descriptor per rank (double-buffered by step
// parity), so that a collective's argument check costs no extra round.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "edt/types.h"
#include "transport/shm/segment.h"
#include "transport/transport.h"

namespace edt::collectives {

class ShmAllreduce {
 public:
  // `members` are the transport ranks of the local ranks, in local order.
  ShmAllreduce(std::shared_ptr<transport::shm::Segment> segment, transport::Transport* transport,
               std::vector<int> members, int local_rank);

  // The descriptor round a large allreduce folds into its first data round:
  // `mine` is published, and `check` sees everyone's before any output is
  // written; an error from it stops every rank at the same point.
  struct Agreement {
    const void* mine;
    size_t bytes;
    std::function<Status(const std::vector<std::vector<uint8_t>>&)> check;
  };

  // recv = op over local ranks of send; in place when send == recv. kAverage
  // divides by the number of local ranks as each slice is reduced, while it
  // is in cache, instead of in a pass of its own over recv.
  Status allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                   const Agreement* agreement = nullptr);

  // One round publishing `mine` (at most kDescriptorBytes) and reading every
  // local rank's into `all` (local order).
  Status round_with_descriptor(const void* mine, size_t bytes, std::vector<std::vector<uint8_t>>* all);

 private:
  // Whether `bytes` fit the one-round path.
  bool is_small(size_t bytes) const { return bytes <= kSmallBytes && bytes <= segment_->slot_bytes(); }
  // Completes a small allreduce after its round.
  void small_allreduce_after_round(void* recv, size_t count, DataType type, ReduceOp op);
  static constexpr size_t kSmallBytes = 32 << 10;

  Status round();
  Status round_reading_descriptors(const Agreement& a);
  uint8_t* my_slot(int buffer) { return segment_->slot(local_rank_, buffer); }

  std::shared_ptr<transport::shm::Segment> segment_;
  transport::Transport* transport_;
  std::vector<int> members_;
  std::vector<int> peers_;  // members_ without this rank, for liveness checks
  int local_rank_;
  int n_;
  uint64_t step_ = 0;
  uint64_t use_ = 0;
};

}  // namespace edt::collectives
