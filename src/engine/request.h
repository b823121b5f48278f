// A request to the engine as every rank describes it (Meta): the collective,
// its dtype, reduce op, root, scale factors and shape; and how Horovod's
// error messages spell ops and shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "edt/types.h"

namespace edt::engine {

using edt::DataType;
using edt::ReduceOp;

enum class OpType : uint8_t { kAllreduce, kAllgather, kBroadcast, kAlltoall, kReducescatter, kBarrier };
const char* op_type_name(OpType type);  // "allreduce", ...

// What one rank says about one named request.
struct Meta {
  OpType type = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<int64_t> shape;
  std::vector<int64_t> splits;  // alltoall: rows sent to each rank; differs between ranks

  bool operator==(const Meta&) const = default;
};

// "Sum", "Average", ...: Horovod's spelling.
const char* op_name(ReduceOp op);

// "[2, 3]": a shape as Horovod's mismatch messages print it.
std::string shape_string(const std::vector<int64_t>& shape);
int64_t num_elements(const std::vector<int64_t>& shape);

}  // namespace edt::engine
