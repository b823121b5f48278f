#include "transport/shm/shm_channel.h"

#include <algorithm>
#include <cstring>

namespace edt::transport::shm {
namespace {

class ShmChannel final : public Channel {
 public:
  ShmChannel(std::shared_ptr<Segment> segment, int me, int other, std::string peer, proc::ProcessId process,
             int my_rank)
      : segment_(std::move(segment)),
        out_(segment_->ring(me, other)),
        in_(segment_->ring(other, me)),
        other_bell_(&segment_->doorbell(other)),
        peer_(std::move(peer)),
        process_(process),
        my_rank_(my_rank) {}

  Result<size_t> try_send(const uint8_t* data, size_t n) override {
    const uint64_t head = out_.head->load(std::memory_order_relaxed);
    const uint64_t tail = out_.tail->load(std::memory_order_acquire);
    n = std::min<size_t>(n, out_.capacity - (head - tail));
    if (n == 0) return size_t{0};
    const size_t at = head & (out_.capacity - 1);
    const size_t first = std::min(n, out_.capacity - at);
    std::memcpy(out_.data + at, data, first);
    std::memcpy(out_.data, data + first, n - first);
    out_.head->store(head + n, std::memory_order_release);
    other_bell_->ring();
    return n;
  }

  Result<std::span<const uint8_t>> peek() override {
    const uint64_t tail = in_.tail->load(std::memory_order_relaxed);
    const uint64_t head = in_.head->load(std::memory_order_acquire);
    const size_t at = tail & (in_.capacity - 1);
    const size_t n = std::min<size_t>(head - tail, in_.capacity - at);
    return std::span<const uint8_t>(in_.data + at, n);
  }

  void consume(size_t n) override {
    in_.tail->store(in_.tail->load(std::memory_order_relaxed) + n, std::memory_order_release);
    other_bell_->ring();
  }

  Status check_peer() override {
    int by = segment_->broken_by();
    if (by >= 0 && by != my_rank_)
      return peer_failed("rank " + std::to_string(by) + " on this host failed or aborted mid-collective");
    if (proc::alive(process_)) return Status::ok();
    return peer_failed(peer_ + " died mid-collective (process " + std::to_string(process_.pid) +
                       " is gone); the job must re-form without it");
  }

  void poison() override { segment_->mark_broken(my_rank_); }

 private:
  std::shared_ptr<Segment> segment_;
  Segment::Ring out_, in_;
  Doorbell* other_bell_;  // the peer's: it may wait for data or room
  std::string peer_;
  proc::ProcessId process_;
  int my_rank_;
};

}  // namespace

std::unique_ptr<Channel> make_channel(std::shared_ptr<Segment> segment, int me, int other, std::string peer,
                                      proc::ProcessId peer_process, int my_rank) {
  return std::make_unique<ShmChannel>(std::move(segment), me, other, std::move(peer), peer_process, my_rank);
}

}  // namespace edt::transport::shm
