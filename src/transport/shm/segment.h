// The shared-memory segment of one host in one communicator.
//
// Layout (every part cache-line aligned):
//   header       magic, local size, the "broken by" word
//   control[i]   per local rank: a step flag on its own cache line, a
//                descriptor area for the op it is running, and the rank's
//                doorbell (transport/doorbell.h), rung by whoever publishes
//                something it may wait for
//   rings[i][j]  for each ordered pair i != j: a single-producer single-
//                consumer byte ring (head and tail counters on their own
//                lines), the Channel between local ranks i and j
//   slots[i][b]  per local rank kSlotBuffers slot buffers, used in turn by the
//                shared-memory allreduce (see collectives/shm_allreduce.h)
//
// The local leader creates it under a unique /dev/shm name, publishes the
// name through the store, and unlinks it once every local rank has mapped it,
// so nothing is left behind however the job ends.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "edt/store.h"
#include "transport/doorbell.h"
#include "transport/transport.h"

namespace edt::transport::shm {

inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kDescriptorBytes = 64;  // two of these per rank, by step parity
inline constexpr int kSlotBuffers = 3;

struct alignas(kCacheLine) Counter {
  std::atomic<uint64_t> value;
};

class Segment {
 public:
  struct Options {
    std::string key;     // store key prefix for this host's segment
    int local_rank = 0;  // 0 creates the segment
    int local_size = 1;
    Clock::time_point deadline;
  };
  static Result<std::shared_ptr<Segment>> create(Store& store, const Options& options);
  ~Segment();

  int local_size() const { return local_size_; }
  size_t ring_bytes() const { return ring_bytes_; }
  size_t slot_bytes() const { return slot_bytes_; }

  std::atomic<uint64_t>& flag(int local) { return control(local)->flag.value; }
  uint8_t* descriptor(int local, int parity) { return control(local)->descriptor[parity]; }
  Doorbell& doorbell(int local) { return control(local)->doorbell; }
  uint8_t* slot(int local, int buffer) {
    return base_ + slots_offset_ + (size_t(local) * kSlotBuffers + size_t(buffer)) * slot_bytes_;
  }

  struct Ring {
    std::atomic<uint64_t>* head;  // bytes written, by the producer
    std::atomic<uint64_t>* tail;  // bytes read, by the consumer
    uint8_t* data;
    size_t capacity;  // a power of two
  };
  Ring ring(int from, int to);

  // Records that global rank `rank` broke the communicator (first one wins)
  // and wakes every local rank, so that blocked waits see it.
  void mark_broken(int rank);
  // The global rank that broke it, or -1.
  int broken_by() const;

 private:
  struct alignas(kCacheLine) Control {
    Counter flag;
    uint8_t descriptor[2][kDescriptorBytes];
    Doorbell doorbell;
  };
  struct alignas(kCacheLine) Header {
    uint64_t magic;
    uint32_t local_size;
    std::atomic<int32_t> broken_by;
  };
  struct alignas(kCacheLine) RingHeader {
    Counter head;
    Counter tail;
  };

  Segment(uint8_t* base, size_t bytes, int local_size);
  Control* control(int local) {
    return reinterpret_cast<Control*>(base_ + sizeof(Header)) + local;
  }
  Header* header() const { return reinterpret_cast<Header*>(base_); }

  uint8_t* base_;
  size_t bytes_;
  int local_size_;
  size_t ring_bytes_, slot_bytes_;
  size_t rings_offset_, slots_offset_;
};

}  // namespace edt::transport::shm
