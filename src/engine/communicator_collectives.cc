#include "engine/communicator_collectives.h"

#include <algorithm>
#include <cstring>

namespace edt::engine {
namespace {

class CommunicatorCollectives final : public CollectiveBackend {
 public:
  explicit CommunicatorCollectives(std::shared_ptr<Communicator> c) : c_(std::move(c)) {}

  int rank() const override { return c_->rank(); }
  int size() const override { return c_->size(); }

  Status allreduce(void* buffer, size_t count, DataType dtype, ReduceOp op) override {
    return c_->allreduce(buffer, buffer, count, dtype, op);
  }
  // The Communicator's reduce_scatter gives every rank an equal block;
  // uneven counts travel padded to the largest (padding is reduced too, and
  // dropped).
  Status reduce_scatter(const void* in, void* out, const std::vector<size_t>& counts, DataType dtype,
                        ReduceOp op) override {
    const size_t largest = *std::max_element(counts.begin(), counts.end());
    if (std::all_of(counts.begin(), counts.end(), [&](size_t n) { return n == largest; }))
      return c_->reduce_scatter(in, out, largest, dtype, op);
    const size_t element = dtype_size(dtype);
    std::vector<size_t> bytes(counts.size());
    for (size_t r = 0; r < counts.size(); ++r) bytes[r] = counts[r] * element;
    pack_padded(in, bytes, largest * element);
    padded_recv_.resize(largest * element);
    EDT_RETURN_IF_ERROR(c_->reduce_scatter(padded_send_.data(), padded_recv_.data(), largest, dtype, op));
    if (counts[rank()]) std::memcpy(out, padded_recv_.data(), counts[rank()] * element);
    return Status::ok();
  }

  Status allgatherv(const void* in, void* out, const std::vector<size_t>& bytes) override {
    return c_->allgatherv(in, out, bytes, DataType::kUInt8);
  }
  Status broadcast(void* buffer, size_t bytes, int root) override {
    return c_->broadcast(buffer, bytes, DataType::kUInt8, root);
  }

  // The Communicator's alltoall moves equal blocks; uneven ones travel padded
  // to the largest block any rank sends, which one small allreduce finds.
  Status alltoallv(const void* in, const std::vector<size_t>& send_bytes, void* out,
                   const std::vector<size_t>& recv_bytes) override {
    int64_t block = static_cast<int64_t>(*std::max_element(send_bytes.begin(), send_bytes.end()));
    EDT_RETURN_IF_ERROR(c_->allreduce(&block, &block, 1, DataType::kInt64, ReduceOp::kMax));
    size_t b = static_cast<size_t>(block);
    pack_padded(in, send_bytes, b);
    padded_recv_.resize(b * size());
    EDT_RETURN_IF_ERROR(c_->alltoall(padded_send_.data(), padded_recv_.data(), b, DataType::kUInt8));
    auto* dst = static_cast<uint8_t*>(out);
    for (int s = 0; s < size(); ++s) {
      if (recv_bytes[s]) std::memcpy(dst, padded_recv_.data() + s * b, recv_bytes[s]);
      dst += recv_bytes[s];
    }
    return Status::ok();
  }

  Status barrier() override { return c_->barrier(); }

 private:
  // padded_send_ = the consecutive blocks of `in` (bytes[r] for rank r),
  // each at the start of its own `block`-byte slot, zero after it.
  void pack_padded(const void* in, const std::vector<size_t>& bytes, size_t block) {
    padded_send_.assign(block * bytes.size(), 0);
    const auto* src = static_cast<const uint8_t*>(in);
    for (size_t r = 0; r < bytes.size(); ++r) {
      if (bytes[r]) std::memcpy(padded_send_.data() + r * block, src, bytes[r]);
      src += bytes[r];
    }
  }

  std::shared_ptr<Communicator> c_;
  std::vector<uint8_t> padded_send_, padded_recv_;
};

}  // namespace

std::unique_ptr<CollectiveBackend> communicator_collectives(std::shared_ptr<Communicator> communicator) {
  return std::make_unique<CommunicatorCollectives>(std::move(communicator));
}

}  // namespace edt::engine
