// Element types and reduction operations of collectives.
//
// DataType names the element type of a buffer; ReduceOp how allreduce and
// reduce_scatter combine elements. Names are the lowercase spellings used by
// flags, the Python layer and error messages ("float32", "bfloat16", "sum").
// Every function here is pure and safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "edt/status.h"

namespace edt {

enum class DataType : uint8_t {
  kFloat32 = 0,
  kFloat64,
  kFloat16,   // IEEE 754 binary16; reduced in float, rounded to nearest even
  kBFloat16,  // bfloat16; reduced in float, rounded to nearest even
  kInt32,
  kInt64,
  kUInt8,
};

enum class ReduceOp : uint8_t {
  kSum = 0,
  kAverage,  // the sum divided by the number of ranks (integers: truncated)
  kMin,
  kMax,
  kProduct,
};

inline constexpr DataType kAllDataTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                             DataType::kBFloat16, DataType::kInt32,  DataType::kInt64,
                                             DataType::kUInt8};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                                             ReduceOp::kProduct};

// Bytes per element: 4, 8, 2, 2, 4, 8, 1.
size_t dtype_size(DataType type);
// "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8".
const char* dtype_name(DataType type);
// The inverse of dtype_name; also accepts the aliases float, double, half,
// fp32, fp16, bf16, int, long, byte. kInvalidArgument lists the names.
Result<DataType> parse_dtype(std::string_view name);

// "sum", "average", "min", "max", "product".
const char* reduce_op_name(ReduceOp op);
// The inverse of reduce_op_name; also accepts avg, mean, prod.
Result<ReduceOp> parse_reduce_op(std::string_view name);

}  // namespace edt
