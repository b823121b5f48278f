// The descriptor every rank publishes before each collective, and the check
// that turns a disagreement between ranks into the same error on every rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "edt/status.h"
#include "edt/types.h"

namespace edt::collectives {

enum class OpKind : uint8_t { kAllreduce = 1, kBroadcast, kAllgather, kAllgatherv, kReduceScatter, kAlltoall, kBarrier };

const char* op_kind_name(OpKind kind);

struct Descriptor {
  uint64_t seq = 0;     // ops this communicator has run before this one
  uint64_t count = 0;   // elements this rank passes (allgatherv: its own block)
  uint64_t layout = 0;  // allgatherv: a hash of recv_counts; else 0
  int32_t root = 0;     // broadcast only
  OpKind kind = OpKind::kBarrier;
  DataType type = DataType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
  uint8_t bad_arguments = 0;  // this rank's own arguments were invalid
};
static_assert(sizeof(Descriptor) <= 32);

// OK if every rank's descriptor agrees; otherwise kInvalidArgument naming the
// first disagreeing rank and rank 0 with what each passed. Every rank gets
// the same descriptors, so every rank returns the same error.
// `recv_counts` (allgatherv) are this rank's; they equal everyone's once the
// layout hashes agree.
Status check_descriptors(const std::vector<Descriptor>& all, const std::vector<size_t>* recv_counts);

uint64_t hash_counts(const std::vector<size_t>& counts);

}  // namespace edt::collectives
