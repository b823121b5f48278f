// edt-bench: collective bandwidth and latency, printed like nccl-tests.
//
//   edtrun -np 2 edt-bench allreduce|broadcast|allgather [--min-bytes 4] [--max-bytes 256M]
//          [--dtype float32] [--op sum] [--iters N] [--warmup N] [--check] [--csv FILE]
//
// Sizes double from --min-bytes to --max-bytes. For each: warm-up ops, a
// barrier, then `iters` back-to-back ops timed on rank 0 (the same rule as the
// peers in bench/peers: about 2 GB moved per size, 5 to 1000 iterations).
// algbw = size / time; busbw = algbw x factor, nccl-tests' factors: allreduce
// 2(n-1)/n, allgather (n-1)/n (size is the gathered total), broadcast 1.
// --check fills known values and counts wrong elements on every rank.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "common/log.h"
#include "common/units.h"
#include "kernels/reduce.h"
#include "edt/communicator.h"

namespace edt {
namespace {

struct Options {
  std::string collective;
  uint64_t min_bytes = 4, max_bytes = 256u << 20;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int iters = 0, warmup = -1;  // 0 / -1: by size
  bool check = false;
  std::string csv;
};

int iters_for(uint64_t bytes) { return static_cast<int>(std::clamp(2e9 / double(std::max<uint64_t>(bytes, 1)), 5.0, 1000.0)); }

// A value every type holds exactly, so any reduction order gives the same
// bits: small integers, and only 1s and 2s for products.
double check_value(DataType, ReduceOp op, int rank, size_t i) {
  if (op == ReduceOp::kProduct) return double(1 + (rank + i) % 2);
  return double(1 + (rank * 3 + i) % 5);
}

void fill(std::vector<uint8_t>& buf, size_t offset_elems, size_t count, DataType type, ReduceOp op, int rank) {
  for (size_t i = 0; i < count; ++i) {
    double v = check_value(type, op, rank, i);
    uint8_t* p = buf.data() + (offset_elems + i) * dtype_size(type);
    switch (type) {
      case DataType::kFloat32: { float f = float(v); std::memcpy(p, &f, 4); break; }
      case DataType::kFloat64: std::memcpy(p, &v, 8); break;
      case DataType::kFloat16: { uint16_t h = kernels::float_to_half(float(v)); std::memcpy(p, &h, 2); break; }
      case DataType::kBFloat16: { uint16_t h = kernels::float_to_bfloat16(float(v)); std::memcpy(p, &h, 2); break; }
      case DataType::kInt32: { int32_t x = int32_t(v); std::memcpy(p, &x, 4); break; }
      case DataType::kInt64: { int64_t x = int64_t(v); std::memcpy(p, &x, 8); break; }
      case DataType::kUInt8: *p = uint8_t(v); break;
    }
  }
}

size_t count_wrong(const uint8_t* got, const uint8_t* want, size_t count, size_t es) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += std::memcmp(got + i * es, want + i * es, es) != 0;
  return wrong;
}

class Bench {
 public:
  Bench(Communicator& comm, const Options& o) : c_(comm), o_(o), n_(comm.size()), es_(dtype_size(o.type)) {}

  // Elements per rank's buffer for a size of `bytes` (allgather: the total).
  size_t elems(uint64_t bytes) const {
    size_t total = bytes / es_;
    return o_.collective == "allgather" ? total / size_t(n_) : total;
  }

  Status run_once(size_t count) {
    if (o_.collective == "allreduce") return c_.allreduce(send_.data(), recv_.data(), count, o_.type, o_.op);
    if (o_.collective == "broadcast") return c_.broadcast(recv_.data(), count, o_.type, 0);
    return c_.allgather(send_.data(), recv_.data(), count, o_.type);
  }

  double bus_factor() const {
    if (o_.collective == "allreduce") return 2.0 * (n_ - 1) / n_;
    if (o_.collective == "allgather") return double(n_ - 1) / n_;
    return 1.0;
  }

  // Wrong elements on this rank after one op on known values.
  Result<size_t> check(size_t count) {
    const size_t recv_elems = o_.collective == "allgather" ? count * n_ : count;
    std::vector<uint8_t> want(recv_elems * es_);
    if (o_.collective == "allreduce") {
      fill(send_, 0, count, o_.type, o_.op, c_.rank());
      std::vector<uint8_t> other(count * es_);
      fill(want, 0, count, o_.type, o_.op, 0);
      for (int r = 1; r < n_; ++r) {
        fill(other, 0, count, o_.type, o_.op, r);
        kernels::reduce_into(want.data(), other.data(), count, o_.type, kernels::combining_op(o_.op));
      }
      if (o_.op == ReduceOp::kAverage) kernels::finish_average(want.data(), count, o_.type, n_);
    } else if (o_.collective == "broadcast") {
      std::fill(recv_.begin(), recv_.end(), 0xAB);
      if (c_.rank() == 0) fill(recv_, 0, count, o_.type, o_.op, 0);
      fill(want, 0, count, o_.type, o_.op, 0);
    } else {
      fill(send_, 0, count, o_.type, o_.op, c_.rank());
      for (int r = 0; r < n_; ++r) fill(want, size_t(r) * count, count, o_.type, o_.op, r);
    }
    EDT_RETURN_IF_ERROR(run_once(count));
    return count_wrong(recv_.data(), want.data(), recv_elems, es_);
  }

  Status sweep() {
    const size_t max_elems = elems(o_.max_bytes);
    send_.assign(std::max<size_t>(max_elems, 1) * es_, 0);
    recv_.assign(std::max<size_t>(o_.collective == "allgather" ? max_elems * n_ : max_elems, 1) * es_, 0);
    fill(send_, 0, max_elems, o_.type, o_.op, c_.rank());
    FILE* csv = nullptr;
    if (c_.rank() == 0) {
      std::printf("# edt-bench %s: %d ranks on %d host(s), transport %s, dtype %s%s%s\n", o_.collective.c_str(), n_,
                  c_.cross_size(), c_.transport_name().c_str(), dtype_name(o_.type),
                  o_.collective == "allreduce" ? ", op " : "", o_.collective == "allreduce" ? reduce_op_name(o_.op) : "");
      std::printf("%12s %12s %9s %8s %12s %12s %12s %8s\n", "size(B)", "count", "type", "op", "time(us)",
                  "algbw(GB/s)", "busbw(GB/s)", "#wrong");
      if (!o_.csv.empty()) {
        csv = std::fopen(o_.csv.c_str(), "w");
        if (!csv) return io_error("opening --csv " + o_.csv, errno);
        std::fprintf(csv, "bytes,count,dtype,op,time_us,algbw_gbps,busbw_gbps,wrong\n");
      }
    }
    double bus_sum = 0;
    int rows = 0;
    for (uint64_t bytes = o_.min_bytes; bytes <= o_.max_bytes; bytes *= 2) {
      const size_t count = elems(bytes);
      if (count == 0) continue;  // smaller than one element per rank
      const uint64_t size = o_.collective == "allgather" ? count * n_ * es_ : count * es_;
      const int iters = o_.iters > 0 ? o_.iters : iters_for(size);
      const int warmup = o_.warmup >= 0 ? o_.warmup : iters / 10 + 2;
      for (int i = 0; i < warmup; ++i) EDT_RETURN_IF_ERROR(run_once(count));
      EDT_RETURN_IF_ERROR(c_.barrier());
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) EDT_RETURN_IF_ERROR(run_once(count));
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
      int64_t wrong = -1;
      if (o_.check) {
        EDT_ASSIGN_OR_RETURN(size_t mine, check(count));
        wrong = static_cast<int64_t>(mine);
        EDT_RETURN_IF_ERROR(c_.allreduce(&wrong, &wrong, 1, DataType::kInt64, ReduceOp::kSum));
        fill(send_, 0, max_elems, o_.type, o_.op, c_.rank());
      }
      const double algbw = double(size) / us / 1e3;
      const double busbw = algbw * bus_factor();
      bus_sum += busbw;
      ++rows;
      if (c_.rank() == 0) {
        const char* op = o_.collective == "allreduce" ? reduce_op_name(o_.op) : "none";
        std::string wrong_text = o_.check ? std::to_string(wrong) : "N/A";
        std::printf("%12llu %12zu %9s %8s %12.2f %12.3f %12.3f %8s\n", (unsigned long long)size, count,
                    dtype_name(o_.type), op, us, algbw, busbw, wrong_text.c_str());
        std::fflush(stdout);
        if (csv)
          std::fprintf(csv, "%llu,%zu,%s,%s,%.3f,%.4f,%.4f,%lld\n", (unsigned long long)size, count,
                       dtype_name(o_.type), op, us, algbw, busbw, (long long)(o_.check ? wrong : 0));
      }
    }
    if (c_.rank() == 0) {
      std::printf("# Avg bus bandwidth: %.3f GB/s\n", rows ? bus_sum / rows : 0.0);
      if (csv) std::fclose(csv);
    }
    return Status::ok();
  }

 private:
  Communicator& c_;
  const Options& o_;
  int n_;
  size_t es_;
  std::vector<uint8_t> send_, recv_;
};

int main_impl(int argc, char** argv) {
  Options o;
  std::string min_bytes = "4", max_bytes = "256M", dtype = "float32", op = "sum";
  CLI::App app{"edt-bench: collective bandwidth and latency (run under edtrun)"};
  app.add_option("collective", o.collective, "allreduce, broadcast or allgather")
      ->required()
      ->check(CLI::IsMember({"allreduce", "broadcast", "allgather"}));
  app.add_option("--min-bytes", min_bytes, "smallest size (512, 4K, 1M...)");
  app.add_option("--max-bytes", max_bytes, "largest size");
  app.add_option("--dtype", dtype, "float32, float64, float16, bfloat16, int32, int64, uint8");
  app.add_option("--op", op, "sum, average, min, max, product (allreduce)");
  app.add_option("--iters", o.iters, "timed iterations per size (default: by size)");
  app.add_option("--warmup", o.warmup, "untimed iterations per size (default: iters/10 + 2)");
  app.add_flag("--check", o.check, "verify results and count wrong elements");
  app.add_option("--csv", o.csv, "also write the table as CSV (rank 0)");
  CLI11_PARSE(app, argc, argv);

  auto fail = [](const Status& s) {
    edt::log::error("{}", s.to_string());
    return 1;
  };
  auto lo = parse_size(min_bytes);
  if (!lo.is_ok()) return fail(lo.status().with_context("--min-bytes"));
  auto hi = parse_size(max_bytes);
  if (!hi.is_ok()) return fail(hi.status().with_context("--max-bytes"));
  auto t = parse_dtype(dtype);
  if (!t.is_ok()) return fail(t.status().with_context("--dtype"));
  auto r = parse_reduce_op(op);
  if (!r.is_ok()) return fail(r.status().with_context("--op"));
  o.min_bytes = std::max<uint64_t>(*lo, 1);
  o.max_bytes = *hi;
  o.type = *t;
  o.op = *r;
  if (o.min_bytes > o.max_bytes) return fail(invalid_argument("--min-bytes is larger than --max-bytes"));

  auto comm = Communicator::from_env();
  if (!comm.is_ok()) return fail(comm.status());
  Bench bench(**comm, o);
  Status s = bench.sweep();
  if (!s.is_ok()) return fail(s.with_context("rank " + std::to_string((*comm)->rank())));
  return 0;
}

}  // namespace
}  // namespace edt

int main(int argc, char** argv) {
  edt::log::init("edt-bench");
  return edt::main_impl(argc, argv);
}
