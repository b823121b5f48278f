// The tables behind edt/types.h: element sizes, names and the names parsed
// for DataType and ReduceOp.
#include "edt/types.h"

#include <string>

namespace edt {

size_t dtype_size(DataType type) {
  switch (type) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kUInt8: return 1;
  }
  return 1;
}

const char* dtype_name(DataType type) {
  switch (type) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
  }
  return "unknown";
}

Result<DataType> parse_dtype(std::string_view name) {
  for (DataType t : kAllDataTypes)
    if (name == dtype_name(t)) return t;
  struct Alias {
    std::string_view name;
    DataType type;
  };
  static constexpr Alias kAliases[] = {
      {"float", DataType::kFloat32}, {"fp32", DataType::kFloat32}, {"double", DataType::kFloat64},
      {"fp64", DataType::kFloat64},  {"half", DataType::kFloat16}, {"fp16", DataType::kFloat16},
      {"bf16", DataType::kBFloat16}, {"int", DataType::kInt32},    {"long", DataType::kInt64},
      {"byte", DataType::kUInt8}};
  for (const auto& a : kAliases)
    if (name == a.name) return a.type;
  return invalid_argument("unknown dtype '" + std::string(name) +
                          "'; use one of float32, float64, float16, bfloat16, int32, int64, uint8");
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAverage: return "average";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "product";
  }
  return "unknown";
}

Result<ReduceOp> parse_reduce_op(std::string_view name) {
  for (ReduceOp op : kAllReduceOps)
    if (name == reduce_op_name(op)) return op;
  if (name == "avg" || name == "mean") return ReduceOp::kAverage;
  if (name == "prod") return ReduceOp::kProduct;
  return invalid_argument("unknown reduce op '" + std::string(name) + "'; use one of sum, average, min, max, product");
}

}  // namespace edt
