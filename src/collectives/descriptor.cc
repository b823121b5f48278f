#include "collectives/descriptor.h"

namespace edt::collectives {
namespace {

std::string what_sent(const Descriptor& d) {
  std::string s = std::string(dtype_name(d.type)) + " x " + std::to_string(d.count) + " elements";
  switch (d.kind) {
    case OpKind::kAllreduce:
    case OpKind::kReduceScatter: return s + " (" + reduce_op_name(d.op) + ")";
    case OpKind::kBroadcast: return s + " from root " + std::to_string(d.root);
    default: return s;
  }
}

}  // namespace

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllreduce: return "allreduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kAllgather: return "allgather";
    case OpKind::kAllgatherv: return "allgatherv";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kAlltoall: return "alltoall";
    case OpKind::kBarrier: return "barrier";
  }
  return "unknown";
}

uint64_t hash_counts(const std::vector<size_t>& counts) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the 64-bit counts
  for (size_t c : counts) {
    for (int i = 0; i < 8; ++i) {
      h ^= (uint64_t(c) >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

Status check_descriptors(const std::vector<Descriptor>& all, const std::vector<size_t>* recv_counts) {
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r].bad_arguments)
      return invalid_argument(std::string(op_kind_name(all[r].kind)) + ": rank " + std::to_string(r) +
                              " passed invalid arguments (its own error says which); no rank ran the collective");
  const Descriptor& first = all[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const Descriptor& d = all[r];
    const std::string rank = "rank " + std::to_string(r);
    if (d.seq != first.seq || d.kind != first.kind)
      return invalid_argument("collective mismatch: rank 0 called " + std::string(op_kind_name(first.kind)) +
                              " (op #" + std::to_string(first.seq) + "), " + rank + " called " +
                              op_kind_name(d.kind) + " (op #" + std::to_string(d.seq) +
                              "); every rank must call the same collectives in the same order");
    const char* kind = op_kind_name(d.kind);
    const bool counts_must_match = d.kind != OpKind::kAllgatherv && d.kind != OpKind::kBarrier;
    if (d.type != first.type || (counts_must_match && d.count != first.count) ||
        ((d.kind == OpKind::kAllreduce || d.kind == OpKind::kReduceScatter) && d.op != first.op) ||
        (d.kind == OpKind::kBroadcast && d.root != first.root))
      return invalid_argument(std::string(kind) + " mismatch: rank 0 sent " + what_sent(first) + ", " + rank +
                              " sent " + what_sent(d) + "; every rank must pass the same dtype, count" +
                              (d.kind == OpKind::kBroadcast ? " and root" : " and op"));
    if (d.kind == OpKind::kAllgatherv && d.layout != first.layout)
      return invalid_argument("allgatherv mismatch: rank 0 and " + rank +
                              " pass different recv_counts; every rank must pass the same list");
  }
  if (recv_counts != nullptr) {
    for (size_t r = 0; r < all.size(); ++r)
      if (all[r].count != (*recv_counts)[r])
        return invalid_argument("allgatherv mismatch: recv_counts says rank " + std::to_string(r) + " sends " +
                                std::to_string((*recv_counts)[r]) + " elements, rank " + std::to_string(r) +
                                " sent " + what_sent(all[r]));
  }
  return Status::ok();
}

}  // namespace edt::collectives
