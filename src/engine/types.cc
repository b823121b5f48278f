#include "engine/types.h"

#include "collectives/reduce.h"

namespace edt::engine {

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "Sum";
    case ReduceOp::kAverage: return "Average";
    case ReduceOp::kMin: return "Min";
    case ReduceOp::kMax: return "Max";
    case ReduceOp::kProduct: return "Product";
  }
  return "unknown";
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t num_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

template <typename T>
void scale_typed(void* data, size_t count, double factor) {
  auto* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] * factor);
}

template <float (*kToFloat)(uint16_t), uint16_t (*kFromFloat)(float)>
void scale_16(void* data, size_t count, double factor) {
  auto* p = static_cast<uint16_t*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = kFromFloat(static_cast<float>(kToFloat(p[i]) * factor));
}

}  // namespace

void scale_buffer(void* data, size_t count, DataType dtype, double factor) {
  switch (dtype) {
    case DataType::kFloat32: return scale_typed<float>(data, count, factor);
    case DataType::kFloat64: return scale_typed<double>(data, count, factor);
    case DataType::kInt32: return scale_typed<int32_t>(data, count, factor);
    case DataType::kInt64: return scale_typed<int64_t>(data, count, factor);
    case DataType::kUInt8: return scale_typed<uint8_t>(data, count, factor);
    case DataType::kFloat16:
      return scale_16<collectives::half_to_float, collectives::float_to_half>(data, count, factor);
    case DataType::kBFloat16:
      return scale_16<collectives::bfloat16_to_float, collectives::float_to_bfloat16>(data, count, factor);
  }
}

}  // namespace edt::engine
