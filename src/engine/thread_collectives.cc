#include "engine/thread_collectives.h"

#include <cstring>
#include <numeric>

#include "kernels/reduce.h"

namespace edt::engine {

class ThreadCollectives final : public CollectiveBackend {
 public:
  ThreadCollectives(ThreadGroup* group, int rank) : group_(group), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size_; }

  Status allreduce(void* buffer, size_t count, DataType dtype, ReduceOp op) override {
    size_t bytes = count * dtype_size(dtype);
    stage(buffer, bytes);
    EDT_RETURN_IF_ERROR(group_->barrier());
    std::memcpy(buffer, group_->stages_[0].data(), bytes);
    for (int r = 1; r < size(); ++r) kernels::reduce_into(buffer, group_->stages_[r].data(), count, dtype, op);
    if (op == ReduceOp::kAverage) kernels::finish_average(buffer, count, dtype, size());
    return group_->barrier();
  }

  Status reduce_scatter(const void* in, void* out, const std::vector<size_t>& counts, DataType dtype,
                        ReduceOp op) override {
    const size_t element = dtype_size(dtype);
    stage(in, std::accumulate(counts.begin(), counts.end(), size_t{0}) * element);
    EDT_RETURN_IF_ERROR(group_->barrier());
    const size_t offset = std::accumulate(counts.begin(), counts.begin() + rank_, size_t{0}) * element;
    const size_t mine = counts[rank_];
    if (mine) {
      std::memcpy(out, group_->stages_[0].data() + offset, mine * element);
      for (int r = 1; r < size(); ++r)
        kernels::reduce_into(out, group_->stages_[r].data() + offset, mine, dtype, op);
    }
    return group_->barrier();
  }

  Status allgatherv(const void* in, void* out, const std::vector<size_t>& bytes) override {
    stage(in, bytes[rank_]);
    EDT_RETURN_IF_ERROR(group_->barrier());
    auto* o = static_cast<uint8_t*>(out);
    for (int r = 0; r < size(); ++r) {
      std::memcpy(o, group_->stages_[r].data(), bytes[r]);
      o += bytes[r];
    }
    return group_->barrier();
  }

  Status broadcast(void* buffer, size_t bytes, int root) override {
    if (rank_ == root) stage(buffer, bytes);
    EDT_RETURN_IF_ERROR(group_->barrier());
    if (rank_ != root) std::memcpy(buffer, group_->stages_[root].data(), bytes);
    return group_->barrier();
  }

  Status alltoallv(const void* in, const std::vector<size_t>& send_bytes, void* out,
                   const std::vector<size_t>& recv_bytes) override {
    stage(in, std::accumulate(send_bytes.begin(), send_bytes.end(), size_t{0}));
    // Every rank publishes its send counts too, to find its block in the others' stages.
    group_->send_counts_[rank_] = send_bytes;
    EDT_RETURN_IF_ERROR(group_->barrier());
    auto* o = static_cast<uint8_t*>(out);
    for (int s = 0; s < size(); ++s) {
      size_t offset = 0;
      for (int d = 0; d < rank_; ++d) offset += group_->send_counts_[s][d];
      std::memcpy(o, group_->stages_[s].data() + offset, recv_bytes[s]);
      o += recv_bytes[s];
    }
    return group_->barrier();
  }

  Status barrier() override { return group_->barrier(); }

 private:
  void stage(const void* data, size_t bytes) {
    auto& s = group_->stages_[rank_];
    s.resize(bytes);
    if (bytes) std::memcpy(s.data(), data, bytes);
  }

  ThreadGroup* group_;
  int rank_;
};

std::unique_ptr<CollectiveBackend> ThreadGroup::member(int rank) { return std::make_unique<ThreadCollectives>(this, rank); }

void ThreadGroup::abort() {
  std::lock_guard lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

Status ThreadGroup::barrier() {
  std::unique_lock lock(mu_);
  if (aborted_) return peer_failed("thread group aborted");
  uint64_t generation = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return Status::ok();
  }
  cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
  return aborted_ ? peer_failed("thread group aborted") : Status::ok();
}

}  // namespace edt::engine
