#include "collectives/hierarchical.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace edt::collectives {
namespace {

struct Pieces {
  size_t count, per_piece, es;
  size_t size() const { return (count + per_piece - 1) / per_piece; }
  size_t offset(size_t k) const { return k * per_piece; }
  size_t elems(size_t k) const { return std::min(per_piece, count - offset(k)); }
};

// Stage 2 on a thread of its own: allreduces piece k of buf among the
// leaders once ready(k) says stage 1 has finished it.
class CrossHostPipe {
 public:
  CrossHostPipe(const Group& leaders, uint8_t* buf, Pieces pieces, DataType type, ReduceOp op)
      : leaders_(leaders), buf_(buf), pieces_(pieces), type_(type), op_(op), thread_([this] { run(); }) {}

  ~CrossHostPipe() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void ready(size_t k) {
    {
      std::lock_guard lock(mu_);
      ready_ = k + 1;
    }
    cv_.notify_all();
  }

  // Until piece k is across (or the pipe failed: its error).
  Status wait(size_t k) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_ > k || !status_.is_ok(); });
    return status_;
  }

 private:
  void run() {
    for (size_t k = 0; k < pieces_.size(); ++k) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return ready_ > k || stopping_; });
        if (ready_ <= k) return;  // stopping: stage 1 failed
      }
      uint8_t* piece = buf_ + pieces_.offset(k) * pieces_.es;
      Status s = allreduce(leaders_, piece, piece, pieces_.elems(k), type_, op_);
      const bool failed = !s.is_ok();
      {
        std::lock_guard lock(mu_);
        if (failed) status_ = std::move(s);
        else done_ = k + 1;
      }
      cv_.notify_all();
      if (failed) return;
    }
  }

  Group leaders_;
  uint8_t* buf_;
  Pieces pieces_;
  DataType type_;
  ReduceOp op_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t ready_ = 0, done_ = 0;  // guarded by mu_
  bool stopping_ = false;        // guarded by mu_
  Status status_;                // guarded by mu_
  std::thread thread_;           // last: starts once the rest is set
};

}  // namespace

Status pipelined_hierarchical_allreduce(const Hierarchy& h, const void* send, void* recv, size_t count,
                                        DataType type, ReduceOp op) {
  const size_t es = dtype_size(type);
  const Pieces pieces{count, std::max<size_t>(kPieceBytes / es, 1), es};
  const auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  auto stage1 = [&](size_t k) {
    const size_t at = pieces.offset(k) * es;
    if (h.shm) return h.shm->allreduce(in + at, out + at, pieces.elems(k), type, op);
    if (in != out) std::memcpy(out + at, in + at, pieces.elems(k) * es);  // a host of one rank
    return Status::ok();
  };
  auto stage3 = [&](size_t k) {
    return broadcast(h.local, out + pieces.offset(k) * es, pieces.elems(k) * es, 0);
  };
  if (h.local.index != 0) {
    for (size_t k = 0; k < pieces.size(); ++k) EDT_RETURN_IF_ERROR(stage1(k));
    for (size_t k = 0; k < pieces.size(); ++k) EDT_RETURN_IF_ERROR(stage3(k));
    return Status::ok();
  }
  CrossHostPipe pipe(h.leaders, out, pieces, type, op);
  for (size_t k = 0; k < pieces.size(); ++k) {
    EDT_RETURN_IF_ERROR(stage1(k));
    pipe.ready(k);
  }
  for (size_t k = 0; k < pieces.size(); ++k) {
    EDT_RETURN_IF_ERROR(pipe.wait(k));
    EDT_RETURN_IF_ERROR(stage3(k));
  }
  return Status::ok();
}

}  // namespace edt::collectives
