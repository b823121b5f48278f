#include "collectives/algorithms.h"

#include <cstring>

#include "kernels/reduce.h"

namespace edt::collectives {
namespace {

using transport::Recv;
using transport::Send;

constexpr size_t kChainChunkBytes = 512 << 10;
constexpr size_t kDirectBroadcastBytes = 64 << 10;

uint8_t* at(void* p, size_t offset) { return static_cast<uint8_t*>(p) + offset; }

}  // namespace

std::vector<size_t> block_offsets(size_t count, int n) {
  std::vector<size_t> off(static_cast<size_t>(n) + 1, 0);
  const size_t base = count / size_t(n), extra = count % size_t(n);
  for (size_t i = 0; i < size_t(n); ++i) off[i + 1] = off[i] + base + (i < extra ? 1 : 0);
  return off;
}

Status allreduce(const Group& g, const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  if (g.size() == 1 || count == 0) {
    if (send != recv) std::memcpy(recv, send, count * dtype_size(type));
    return Status::ok();
  }
  if (count * dtype_size(type) <= kDirectAllreduceBytes || count < size_t(g.size()))
    return direct_allreduce(g, send, recv, count, type, op);
  return ring_allreduce(g, send, recv, count, type, op);
}

Status direct_allreduce(const Group& g, const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  const int n = g.size();
  const size_t bytes = count * dtype_size(type);
  std::vector<uint8_t> all(bytes * size_t(n));
  std::memcpy(all.data() + bytes * size_t(g.index), send, bytes);
  std::vector<Send> sends;
  std::vector<Recv> recvs;
  for (int d = 1; d < n; ++d) {
    sends.push_back({g.at(d), send, bytes});
    int from = (g.index - d + n) % n;
    recvs.push_back({g.members[from], all.data() + bytes * size_t(from), bytes});
  }
  EDT_RETURN_IF_ERROR(g.transport->exchange(sends, recvs));
  std::vector<const void*> parts;
  for (int j = 0; j < n; ++j) parts.push_back(all.data() + bytes * size_t(j));
  reduce_in_order(recv, parts, count, type, kernels::combining_op(op));
  return Status::ok();
}

void reduce_in_order(void* recv, std::span<const void* const> parts, size_t count, DataType type, ReduceOp op) {
  if (parts.size() == 1) {
    std::memcpy(recv, parts[0], count * dtype_size(type));
    return;
  }
  kernels::reduce(recv, parts[0], parts[1], count, type, op);
  for (size_t j = 2; j < parts.size(); ++j) kernels::reduce_into(recv, parts[j], count, type, op);
}

Status ring_reduce_scatter(const Group& g, const void* send, void* buf, const std::vector<size_t>& offsets,
                           DataType type, ReduceOp op) {
  const int n = g.size();
  const size_t es = dtype_size(type);
  op = kernels::combining_op(op);
  // Step s: send block index-s-1, receive block index-s-2 and fold it in.
  // Block b starts at position b+1 and gathers one contribution per step,
  // ending complete at position b after n-1 steps. What a position sends at
  // step 0 is its own input; every later send is the block it received (and
  // folded its input into) the step before. So each block is read from send
  // once and written to buf once, and out of place costs no copy.
  if (n == 1 && send != buf) std::memcpy(buf, send, offsets[1] * es);
  for (int s = 0; s < n - 1; ++s) {
    int send_block = ((g.index - s - 1) % n + n) % n;
    int recv_block = ((g.index - s - 2) % n + n) % n;
    const void* from = s == 0 ? send : buf;
    Send out{g.at(1), static_cast<const uint8_t*>(from) + offsets[send_block] * es,
             (offsets[send_block + 1] - offsets[send_block]) * es};
    Recv in{g.at(-1), at(buf, offsets[recv_block] * es), (offsets[recv_block + 1] - offsets[recv_block]) * es,
            true, type, op, static_cast<const uint8_t*>(send) + offsets[recv_block] * es};
    EDT_RETURN_IF_ERROR(g.transport->exchange({out}, {in}));
  }
  return Status::ok();
}

Status ring_allgather(const Group& g, void* buf, const std::vector<size_t>& byte_offsets) {
  const int n = g.size();
  // Step s: pass on block index-s (own first), receive block index-s-1.
  for (int s = 0; s < n - 1; ++s) {
    int send_block = ((g.index - s) % n + n) % n;
    int recv_block = ((g.index - s - 1) % n + n) % n;
    Send send{g.at(1), at(buf, byte_offsets[send_block]), byte_offsets[send_block + 1] - byte_offsets[send_block]};
    Recv recv{g.at(-1), at(buf, byte_offsets[recv_block]), byte_offsets[recv_block + 1] - byte_offsets[recv_block]};
    EDT_RETURN_IF_ERROR(g.transport->exchange({send}, {recv}));
  }
  return Status::ok();
}

Status ring_allreduce(const Group& g, const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  std::vector<size_t> offsets = block_offsets(count, g.size());
  EDT_RETURN_IF_ERROR(ring_reduce_scatter(g, send, recv, offsets, type, op));
  for (auto& o : offsets) o *= dtype_size(type);
  return ring_allgather(g, recv, offsets);
}

Status broadcast(const Group& g, void* buf, size_t bytes, int root) {
  const int n = g.size();
  if (n == 1 || bytes == 0) return Status::ok();
  if (bytes <= kDirectBroadcastBytes || n <= 2) {
    if (g.index != root) return g.transport->exchange({}, {Recv{g.members[root], buf, bytes}});
    std::vector<Send> sends;
    for (int d = 1; d < n; ++d) sends.push_back({g.at(d), buf, bytes});
    return g.transport->exchange(sends, {});
  }
  // A chain root, root+1, ...: each rank forwards chunk c-1 while receiving
  // chunk c, so all links carry data at once.
  const int position = (g.index - root + n) % n;
  const bool last = position == n - 1;
  if (position == 0) return g.transport->exchange({Send{g.at(1), buf, bytes}}, {});
  const size_t chunks = (bytes + kChainChunkBytes - 1) / kChainChunkBytes;
  auto chunk = [&](size_t c) { return std::min(kChainChunkBytes, bytes - c * kChainChunkBytes); };
  for (size_t c = 0; c <= chunks; ++c) {
    std::vector<Send> sends;
    std::vector<Recv> recvs;
    if (c > 0 && !last) sends.push_back({g.at(1), at(buf, (c - 1) * kChainChunkBytes), chunk(c - 1)});
    if (c < chunks) recvs.push_back({g.at(-1), at(buf, c * kChainChunkBytes), chunk(c)});
    EDT_RETURN_IF_ERROR(g.transport->exchange(sends, recvs));
  }
  return Status::ok();
}

Status alltoall(const Group& g, const void* send, void* recv, size_t block_bytes) {
  const int n = g.size();
  if (block_bytes == 0) return Status::ok();  // the buffers may be null
  std::memcpy(at(recv, block_bytes * size_t(g.index)), static_cast<const uint8_t*>(send) + block_bytes * size_t(g.index),
              block_bytes);
  // Step d pairs each position with the one d ahead (to send) and d behind
  // (to receive), so every link is used once per step.
  for (int d = 1; d < n; ++d) {
    int to = (g.index + d) % n, from = (g.index - d + n) % n;
    Send s{g.members[to], static_cast<const uint8_t*>(send) + block_bytes * size_t(to), block_bytes};
    Recv r{g.members[from], at(recv, block_bytes * size_t(from)), block_bytes};
    EDT_RETURN_IF_ERROR(g.transport->exchange({s}, {r}));
  }
  return Status::ok();
}

}  // namespace edt::collectives
