// ThreadCollectives: the CollectiveBackend of ranks that are threads of one
// process, for the engine's unit tests. Each call stages this rank's bytes,
// meets the other ranks at a barrier, reads what it needs from their stages
// and meets them again. Slow and simple on purpose: it is the reference the
// engine is tested against, not a transport.
//
// ThreadGroup::abort() makes every current and later call fail, as a dead
// peer makes a real communicator fail.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/collective_backend.h"

namespace edt::engine {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), stages_(size), send_counts_(size) {}

  // The CollectiveBackend of one rank; the group must outlive it.
  std::unique_ptr<CollectiveBackend> member(int rank);
  void abort();
  int size() const { return size_; }

 private:
  friend class ThreadCollectives;
  Status barrier();

  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;          // guarded by mu_
  uint64_t generation_ = 0;  // guarded by mu_
  bool aborted_ = false;     // guarded by mu_
  // One per rank; written before a barrier, read after it.
  std::vector<std::vector<uint8_t>> stages_;
  std::vector<std::vector<size_t>> send_counts_;  // alltoallv
};

}  // namespace edt::engine
