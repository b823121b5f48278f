// net-collectives-check: every collective of the public API once, checked
// value by value, by a worker that edtrun starts on each host of the
// namespace testbed (tests/net/net_test.py).
//
// Each rank fills its input with small integers that every dtype used here
// holds exactly (products: only 1s and 2s), so any reduction order gives the
// same bits and the expected result is computed locally. Sizes cover the
// direct (small) and the ring (large, counts not divisible by the ranks)
// algorithms, and so the hierarchical path across hosts. Prints
// "rank R/S host H transport T: ok <n> checks" and exits 0, or names the
// first wrong element (collective, dtype, size, index, got, want) and exits 1.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "edt/communicator.h"

namespace {

using edt::Communicator;
using edt::DataType;
using edt::ReduceOp;

double value(int rank, size_t i, ReduceOp op) {
  if (op == ReduceOp::kProduct) return double(1 + (rank + i) % 2);
  return double(1 + (rank * 7 + i * 3) % 11);
}

// Elements are kept as double and stored in the collective's dtype.
struct Typed {
  DataType type;
  std::vector<uint8_t> bytes;

  Typed(DataType t, size_t count) : type(t), bytes(count * edt::dtype_size(t)) {}
  size_t count() const { return bytes.size() / edt::dtype_size(type); }
  void* data() { return bytes.data(); }
  void set(size_t i, double v) {
    switch (type) {
      case DataType::kFloat32: { float f = float(v); std::memcpy(&bytes[i * 4], &f, 4); break; }
      case DataType::kInt32: { int32_t x = int32_t(v); std::memcpy(&bytes[i * 4], &x, 4); break; }
      case DataType::kInt64: { int64_t x = int64_t(v); std::memcpy(&bytes[i * 8], &x, 8); break; }
      default: std::memcpy(&bytes[i * 8], &v, 8); break;  // kFloat64
    }
  }
  double get(size_t i) const {
    switch (type) {
      case DataType::kFloat32: { float f; std::memcpy(&f, &bytes[i * 4], 4); return f; }
      case DataType::kInt32: { int32_t x; std::memcpy(&x, &bytes[i * 4], 4); return x; }
      case DataType::kInt64: { int64_t x; std::memcpy(&x, &bytes[i * 8], 8); return double(x); }
      default: { double d; std::memcpy(&d, &bytes[i * 8], 8); return d; }
    }
  }
};

double combine(ReduceOp op, int ranks, size_t i) {
  double acc = value(0, i, op);
  for (int r = 1; r < ranks; ++r) {
    double v = value(r, i, op);
    if (op == ReduceOp::kMin) acc = std::min(acc, v);
    else if (op == ReduceOp::kMax) acc = std::max(acc, v);
    else if (op == ReduceOp::kProduct) acc *= v;
    else acc += v;
  }
  return op == ReduceOp::kAverage ? acc / ranks : acc;
}

class Checker {
 public:
  explicit Checker(Communicator& c) : c_(c), n_(c.size()), me_(c.rank()) {}

  int checks() const { return checks_; }

  // Fails with a message naming the first wrong element.
  bool expect(const std::string& what, const Typed& got, size_t i, double want) {
    ++checks_;
    if (got.get(i) == want) return true;
    std::fprintf(stderr, "rank %d: %s: element %zu is %g, want %g\n", me_, what.c_str(), i, got.get(i), want);
    return false;
  }

  bool status(const std::string& what, const edt::Status& s) {
    if (s.is_ok()) return true;
    std::fprintf(stderr, "rank %d: %s failed: %s\n", me_, what.c_str(), s.to_string().c_str());
    return false;
  }

  bool allreduce(DataType type, ReduceOp op, size_t count, bool async) {
    Typed send(type, count), recv(type, count);
    for (size_t i = 0; i < count; ++i) send.set(i, value(me_, i, op));
    const std::string what = std::string(async ? "allreduce_async " : "allreduce ") + edt::dtype_name(type) + " " +
                             edt::reduce_op_name(op) + " x" + std::to_string(count);
    edt::Status s = async ? c_.allreduce_async(send.data(), recv.data(), count, type, op)->wait()
                          : c_.allreduce(send.data(), recv.data(), count, type, op);
    if (!status(what, s)) return false;
    for (size_t i = 0; i < count; ++i)
      if (!expect(what, recv, i, combine(op, n_, i))) return false;
    return true;
  }

  bool broadcast(size_t count, int root) {
    Typed buf(DataType::kInt32, count);
    for (size_t i = 0; i < count; ++i) buf.set(i, me_ == root ? value(root, i, ReduceOp::kSum) : -1);
    const std::string what = "broadcast x" + std::to_string(count) + " from " + std::to_string(root);
    if (!status(what, c_.broadcast(buf.data(), count, DataType::kInt32, root))) return false;
    for (size_t i = 0; i < count; ++i)
      if (!expect(what, buf, i, value(root, i, ReduceOp::kSum))) return false;
    return true;
  }

  // allgatherv with rank r contributing count + r elements (allgather: all count).
  bool allgather(size_t count, bool varying) {
    std::vector<size_t> counts(n_);
    size_t total = 0;
    for (int r = 0; r < n_; ++r) total += counts[r] = count + (varying ? r : 0);
    Typed send(DataType::kFloat32, counts[me_]), recv(DataType::kFloat32, total);
    for (size_t i = 0; i < counts[me_]; ++i) send.set(i, value(me_, i, ReduceOp::kSum));
    const std::string what = std::string(varying ? "allgatherv" : "allgather") + " x" + std::to_string(count);
    edt::Status s = varying ? c_.allgatherv(send.data(), recv.data(), counts, DataType::kFloat32)
                            : c_.allgather(send.data(), recv.data(), count, DataType::kFloat32);
    if (!status(what, s)) return false;
    for (int r = 0, at = 0; r < n_; at += int(counts[r]), ++r)
      for (size_t i = 0; i < counts[r]; ++i)
        if (!expect(what, recv, at + i, value(r, i, ReduceOp::kSum))) return false;
    return true;
  }

  bool reduce_scatter(size_t count) {
    Typed send(DataType::kInt64, count * n_), recv(DataType::kInt64, count);
    for (size_t i = 0; i < count * n_; ++i) send.set(i, value(me_, i, ReduceOp::kSum));
    const std::string what = "reduce_scatter x" + std::to_string(count);
    if (!status(what, c_.reduce_scatter(send.data(), recv.data(), count, DataType::kInt64, ReduceOp::kSum)))
      return false;
    for (size_t i = 0; i < count; ++i)
      if (!expect(what, recv, i, combine(ReduceOp::kSum, n_, me_ * count + i))) return false;
    return true;
  }

  // Block j of rank r's input holds 1000 r + j + i; rank me gets block me of each.
  bool alltoall(size_t count) {
    Typed send(DataType::kInt32, count * n_), recv(DataType::kInt32, count * n_);
    for (int j = 0; j < n_; ++j)
      for (size_t i = 0; i < count; ++i) send.set(j * count + i, 1000.0 * me_ + j + double(i % 97));
    const std::string what = "alltoall x" + std::to_string(count);
    if (!status(what, c_.alltoall(send.data(), recv.data(), count, DataType::kInt32))) return false;
    for (int r = 0; r < n_; ++r)
      for (size_t i = 0; i < count; ++i)
        if (!expect(what, recv, r * count + i, 1000.0 * r + me_ + double(i % 97))) return false;
    return true;
  }

 private:
  Communicator& c_;
  int n_, me_;
  int checks_ = 0;
};

bool run_all(Communicator& comm, Checker& check) {
  // 1000: the direct algorithm; 700001: the ring, not divisible by the
  // ranks; 2500003: pieces of the pipelined hierarchical allreduce, the last
  // one short.
  for (size_t count : {size_t(1), size_t(1000), size_t(700001), size_t(2500003)}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct})
      if (!check.allreduce(DataType::kFloat64, op, count, false)) return false;
    for (DataType type : {DataType::kFloat32, DataType::kInt32, DataType::kInt64})
      if (!check.allreduce(type, ReduceOp::kSum, count, true)) return false;
  }
  for (size_t count : {size_t(1000), size_t(300007)})
    for (int root = 0; root < comm.size(); ++root)
      if (!check.broadcast(count, root)) return false;
  for (size_t count : {size_t(100), size_t(200003)})
    if (!check.allgather(count, false) || !check.allgather(count, true) || !check.reduce_scatter(count) ||
        !check.alltoall(count))
      return false;
  return check.status("barrier", comm.barrier());
}

}  // namespace

int main() {
  auto made = Communicator::from_env();
  if (!made.is_ok()) {
    std::fprintf(stderr, "net-collectives-check: %s\n", made.status().to_string().c_str());
    return 1;
  }
  Communicator& comm = **made;
  Checker check(comm);
  if (!run_all(comm, check)) return 1;
  std::printf("rank %d/%d host %s transport %s: ok %d checks\n", comm.rank(), comm.size(), comm.host().c_str(),
              comm.transport_name().c_str(), check.checks());
  return 0;
}
