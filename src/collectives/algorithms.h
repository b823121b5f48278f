// Collective algorithms over point-to-point channels (any Transport).
//
// Terms. A Group is the ordered list of ranks (members) running one
// algorithm; `index` is this rank's position in it. Algorithms speak of
// positions; members[] maps them to transport ranks, so the same code runs on
// all ranks, on the ranks of one host, or on one leader per host. A buffer of
// `count` elements is cut into `size` blocks of nearly equal element counts
// (block_offsets); block i belongs to position i.
//
// Ring (bandwidth-bound): reduce-scatter then allgather, each size-1 steps in
// which every position sends one block to the next and receives one from the
// previous — full duplex, reducing while receiving. Each rank moves
// 2(n-1)/n of the buffer each way, the optimum. Direct (latency-bound, small
// buffers): every rank sends its whole buffer to every other and reduces all
// of them in member order, one step instead of 2(n-1). Both produce the same
// bits on every rank (each element is combined in one fixed order).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "edt/types.h"
#include "transport/transport.h"

namespace edt::collectives {

struct Group {
  transport::Transport* transport;
  std::vector<int> members;
  int index;

  int size() const { return static_cast<int>(members.size()); }
  // The member `delta` positions after this one (wrapping).
  int at(int delta) const {
    int n = size();
    return members[((index + delta) % n + n) % n];
  }
};

// n+1 element offsets cutting `count` into n blocks, the first count % n
// blocks one element larger.
std::vector<size_t> block_offsets(size_t count, int n);

// Buffers at or below this many bytes use the direct allreduce.
inline constexpr size_t kDirectAllreduceBytes = 64 << 10;

// recv = op over the group of send; in place when send == recv (otherwise
// they must not overlap). kAverage is left as a sum (the caller divides).
Status allreduce(const Group& g, const void* send, void* recv, size_t count, DataType type, ReduceOp op);
Status ring_allreduce(const Group& g, const void* send, void* recv, size_t count, DataType type, ReduceOp op);
Status direct_allreduce(const Group& g, const void* send, void* recv, size_t count, DataType type, ReduceOp op);

// recv = parts[0] op parts[1] op ... in that order (count elements each;
// recv may not overlap any part).
void reduce_in_order(void* recv, std::span<const void* const> parts, size_t count, DataType type, ReduceOp op);

// Ring reduce-scatter of send into buf (blocks by `offsets`, in elements;
// send == buf for in place): afterwards block `g.index` of buf holds the
// reduction of that block; the other blocks of buf are scratch. send is
// only read.
Status ring_reduce_scatter(const Group& g, const void* send, void* buf, const std::vector<size_t>& offsets,
                           DataType type, ReduceOp op);

// Ring allgather in place: block i of buf (byte offsets offsets[i] ..
// offsets[i+1]) comes from position i; this rank's own block is already there.
Status ring_allgather(const Group& g, void* buf, const std::vector<size_t>& byte_offsets);

// buf of `bytes` from position `root` to everyone: direct for small buffers
// or small groups, a pipelined chain otherwise.
Status broadcast(const Group& g, void* buf, size_t bytes, int root);

// Block j (block_bytes) of send to position j; recv block i from position i.
// send and recv must not overlap.
Status alltoall(const Group& g, const void* send, void* recv, size_t block_bytes);

}  // namespace edt::collectives
