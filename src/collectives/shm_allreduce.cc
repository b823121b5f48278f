#include "collectives/shm_allreduce.h"

#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/reduce.h"

namespace edt::collectives {

ShmAllreduce::ShmAllreduce(std::shared_ptr<transport::shm::Segment> segment, transport::Transport* transport,
                           std::vector<int> members, int local_rank)
    : segment_(std::move(segment)),
      transport_(transport),
      members_(std::move(members)),
      local_rank_(local_rank),
      n_(static_cast<int>(members_.size())) {
  for (int i = 0; i < n_; ++i)
    if (i != local_rank_) peers_.push_back(members_[i]);
}

Status ShmAllreduce::round() {
  const uint64_t step = ++step_;
  segment_->flag(local_rank_).store(step, std::memory_order_release);
  int next = 0;  // flags below `next` are known to have arrived
  return transport_->wait_until(
      [&] {
        while (next < n_ && segment_->flag(next).load(std::memory_order_acquire) >= step) ++next;
        return next == n_;
      },
      peers_, "a shared-memory round");
}

Status ShmAllreduce::round_with_descriptor(const void* mine, size_t bytes, std::vector<std::vector<uint8_t>>* all,
                                           const void* data, size_t data_bytes) {
  EDT_CHECK(bytes <= transport::shm::kDescriptorBytes);
  if (data != nullptr) std::memcpy(my_slot(use_ & 1), data, data_bytes);
  const int parity = (step_ + 1) & 1;
  std::memcpy(segment_->descriptor(local_rank_, parity), mine, bytes);
  EDT_RETURN_IF_ERROR(round());
  all->resize(n_);
  for (int i = 0; i < n_; ++i) {
    const uint8_t* d = segment_->descriptor(i, parity);
    (*all)[i].assign(d, d + bytes);
  }
  return Status::ok();
}

void ShmAllreduce::small_allreduce_after_round(void* recv, size_t count, DataType type, ReduceOp op) {
  const int buffer = use_++ & 1;
  const size_t bytes = count * dtype_size(type);
  if (n_ == 1) {
    std::memcpy(recv, segment_->slot(0, buffer), bytes);
    return;
  }
  op = combining_op(op);
  reduce(recv, segment_->slot(0, buffer), segment_->slot(1, buffer), count, type, op);
  for (int j = 2; j < n_; ++j) reduce_into(recv, segment_->slot(j, buffer), count, type, op);
}

Status ShmAllreduce::allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  const size_t es = dtype_size(type);
  if (count == 0) return Status::ok();
  if (is_small(count * es)) {
    std::memcpy(my_slot(use_ & 1), send, count * es);
    EDT_RETURN_IF_ERROR(round());
    small_allreduce_after_round(recv, count, type, op);
    return Status::ok();
  }
  op = combining_op(op);
  const size_t chunk_elems = segment_->slot_bytes() / es;
  const uint8_t* in = static_cast<const uint8_t*>(send);
  uint8_t* out = static_cast<uint8_t*>(recv);
  for (size_t off = 0; off < count; off += chunk_elems) {
    const size_t ce = std::min(chunk_elems, count - off);
    const int buffer = use_++ & 1;
    std::memcpy(my_slot(buffer), in + off * es, ce * es);
    EDT_RETURN_IF_ERROR(round());
    const std::vector<size_t> slices = block_offsets(ce, n_);
    uint8_t* mine = my_slot(buffer) + slices[local_rank_] * es;
    const size_t slice = slices[local_rank_ + 1] - slices[local_rank_];
    for (int j = 0; j < n_; ++j)
      if (j != local_rank_) reduce_into(mine, segment_->slot(j, buffer) + slices[local_rank_] * es, slice, type, op);
    EDT_RETURN_IF_ERROR(round());
    for (int j = 0; j < n_; ++j)
      std::memcpy(out + (off + slices[j]) * es, segment_->slot(j, buffer) + slices[j] * es,
                  (slices[j + 1] - slices[j]) * es);
  }
  return Status::ok();
}

}  // namespace edt::collectives
