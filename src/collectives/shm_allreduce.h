// Allreduce among the ranks of one host through their shared segment.
//
// Every local rank owns a step flag (a counter on its own cache line) and two
// slot buffers. A *round* is: write what the others must see, then raise the
// own flag to the next step number, then wait until every flag has reached
// it. A rank raises its flag only after it has finished reading everything
// of the previous round, so once a rank has seen all flags at step s, nobody
// still reads what was written before step s-1. Slot buffers alternate (use
// u writes buffer u % 2): when use u+2 writes a buffer, every rank has passed
// a round after its last read of use u.
//
// Small buffers (one round): each rank copies its data into its slot, then
// every rank reduces all slots in local-rank order straight into its output.
// Large buffers go in chunks of one slot (two rounds each): each rank copies
// its chunk into its slot; after the round, local rank i reduces slice i of
// the chunk from all slots into slice i of its own slot; after the second
// round every rank copies all reduced slices out. Each chunk stays in cache
// between the copy in, the reduction and the copy out, and the reduction
// work is split evenly.
//
// A round may also carry a descriptor per rank (double-buffered by step
// parity), so that a collective's argument check costs no extra round.
#pragma once

#include <cstdint>
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

  // recv = op over local ranks of send (kAverage left as a sum); in place
  // when send == recv.
  Status allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);

  // One round publishing `mine` (at most kDescriptorBytes) and reading every
  // local rank's into `all` (local order). If `data` is given, it is copied
  // into this rank's next slot first, for small_allreduce_after_round().
  Status round_with_descriptor(const void* mine, size_t bytes, std::vector<std::vector<uint8_t>>* all,
                               const void* data = nullptr, size_t data_bytes = 0);
  // Completes an allreduce whose data rode along with the last round.
  void small_allreduce_after_round(void* recv, size_t count, DataType type, ReduceOp op);

  // Whether `bytes` fit the one-round path.
  bool is_small(size_t bytes) const { return bytes <= kSmallBytes && bytes <= segment_->slot_bytes(); }

 private:
  static constexpr size_t kSmallBytes = 32 << 10;

  Status round();
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
