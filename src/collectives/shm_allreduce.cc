#include "collectives/shm_allreduce.h"

#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "collectives/algorithms.h"
#include "kernels/reduce.h"

namespace edt::collectives {
namespace {

// Outputs larger than this are written with non-temporal stores: they will
// not fit in cache anyway, and streaming stores skip reading each output
// line before overwriting it, a third of the memory traffic of a copy.
constexpr size_t kStreamingOutputBytes = 8 << 20;

// Copies between user buffers and slots. Not memcpy: below about the L2 size
// glibc copies with `rep movsb`, which on some AMD CPUs runs twenty times
// slower when the destination lies a few bytes past the source modulo 4 KiB,
// exactly the case of a malloc'ed user buffer (16 bytes into a page) and a
// page-aligned slot. A loop of vector loads and stores has no such case.
void copy(uint8_t* dst, const uint8_t* src, size_t n, bool streaming) {
  if (n == 0) return;  // an empty tensor's pointers may be null, which memcpy may not take
#if defined(__SSE2__)
  if (n >= 256) {
    size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
    std::memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    const size_t blocks = n / 64;
    auto loop = [&](auto store) {
      for (size_t i = 0; i < blocks; ++i, dst += 64, src += 64) {
        __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
        __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
        __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
        __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
        store(reinterpret_cast<__m128i*>(dst), a);
        store(reinterpret_cast<__m128i*>(dst + 16), b);
        store(reinterpret_cast<__m128i*>(dst + 32), c);
        store(reinterpret_cast<__m128i*>(dst + 48), d);
      }
    };
    if (streaming)
      loop([](__m128i* p, __m128i v) { _mm_stream_si128(p, v); });
    else
      loop([](__m128i* p, __m128i v) { _mm_store_si128(p, v); });
    std::memcpy(dst, src, n % 64);
    return;
  }
#endif
  (void)streaming;
  std::memcpy(dst, src, n);
}

}  // namespace

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
  for (int i = 0; i < n_; ++i)
    if (i != local_rank_) segment_->doorbell(i).ring();
  int next = 0;  // flags below `next` are known to have arrived
  return transport_->wait_until(
      [&] {
        while (next < n_ && segment_->flag(next).load(std::memory_order_acquire) >= step) ++next;
        return next == n_;
      },
      peers_, "a shared-memory round");
}

Status ShmAllreduce::round_with_descriptor(const void* mine, size_t bytes, std::vector<std::vector<uint8_t>>* all) {
  EDT_CHECK(bytes <= transport::shm::kDescriptorBytes);
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
  const int buffer = use_++ % transport::shm::kSlotBuffers;
  const size_t bytes = count * dtype_size(type);
  if (n_ == 1) {
    copy(static_cast<uint8_t*>(recv), segment_->slot(0, buffer), bytes, false);
    return;
  }
  const bool average = op == ReduceOp::kAverage;
  op = kernels::combining_op(op);
  kernels::reduce(recv, segment_->slot(0, buffer), segment_->slot(1, buffer), count, type, op);
  for (int j = 2; j < n_; ++j) kernels::reduce_into(recv, segment_->slot(j, buffer), count, type, op);
  if (average) kernels::finish_average(recv, count, type, n_);
}

Status ShmAllreduce::round_reading_descriptors(const Agreement& a) {
  std::vector<std::vector<uint8_t>> all;
  EDT_RETURN_IF_ERROR(round_with_descriptor(a.mine, a.bytes, &all));
  return a.check(all);
}

Status ShmAllreduce::allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                               const Agreement* agreement) {
  const size_t es = dtype_size(type);
  if (is_small(count * es)) {
    copy(my_slot(use_ % transport::shm::kSlotBuffers), static_cast<const uint8_t*>(send), count * es, false);
    EDT_RETURN_IF_ERROR(agreement ? round_reading_descriptors(*agreement) : round());
    small_allreduce_after_round(recv, count, type, op);
    return Status::ok();
  }
  const bool average = op == ReduceOp::kAverage;
  op = kernels::combining_op(op);
  const size_t chunk_elems = segment_->slot_bytes() / es;
  const size_t chunks = (count + chunk_elems - 1) / chunk_elems;
  const uint8_t* in = static_cast<const uint8_t*>(send);
  uint8_t* out = static_cast<uint8_t*>(recv);
  const bool streaming = count * es >= kStreamingOutputBytes;
  const uint64_t first_use = use_;
  auto buffer_of = [&](size_t k) { return int((first_use + k) % transport::shm::kSlotBuffers); };
  auto elems_of = [&](size_t k) { return std::min(chunk_elems, count - k * chunk_elems); };
  // Round k: chunk k goes in, chunk k-1 comes out (see the header).
  for (size_t k = 0; k <= chunks; ++k) {
    if (k < chunks) {
      // Only the slices the others reduce go in; this rank reads its own
      // slice straight from the input.
      const std::vector<size_t> slices = block_offsets(elems_of(k), n_);
      const uint8_t* src = in + k * chunk_elems * es;
      for (int j = 0; j < n_; ++j)
        if (j != local_rank_)
          copy(my_slot(buffer_of(k)) + slices[j] * es, src + slices[j] * es, (slices[j + 1] - slices[j]) * es, false);
    }
    EDT_RETURN_IF_ERROR(k == 0 && agreement ? round_reading_descriptors(*agreement) : round());
    if (k > 0) {
      const size_t ce = elems_of(k - 1);
      const std::vector<size_t> slices = block_offsets(ce, n_);
      uint8_t* dst = out + (k - 1) * chunk_elems * es;
      for (int j = 0; j < n_; ++j)
        copy(dst + slices[j] * es, segment_->slot(j, buffer_of(k - 1)) + slices[j] * es,
                 (slices[j + 1] - slices[j]) * es, streaming);
    }
    if (k < chunks) {
      const size_t ce = elems_of(k);
      const std::vector<size_t> slices = block_offsets(ce, n_);
      const size_t at = slices[local_rank_] * es, slice = slices[local_rank_ + 1] - slices[local_rank_];
      uint8_t* mine = my_slot(buffer_of(k)) + at;
      const uint8_t* own = in + k * chunk_elems * es + at;
      // In local-rank order, with the own input in its place, as the small
      // path combines.
      auto part = [&](int j) { return j == local_rank_ ? own : segment_->slot(j, buffer_of(k)) + at; };
      kernels::reduce(mine, part(0), part(1), slice, type, op);
      for (int j = 2; j < n_; ++j) kernels::reduce_into(mine, part(j), slice, type, op);
      if (average) kernels::finish_average(mine, slice, type, n_);
    }
  }
#if defined(__SSE2__)
  if (streaming) _mm_sfence();  // streaming stores are weakly ordered
#endif
  // Only now: an op refused in its first round (the ranks disagreed) uses
  // no buffer, as on the small path, so every rank's next op takes the same.
  use_ += chunks;
  return Status::ok();
}

}  // namespace edt::collectives
