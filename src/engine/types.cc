#include "engine/types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "edt/status.h"

namespace edt::engine {

size_t element_size(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kUInt8: return 1;
  }
  EDT_CHECK_MSG(false, "unknown DataType");
}

const char* dtype_name(DataType dtype) {
  switch (dtype) {
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

const char* reduce_op_name(ReduceOp op) {
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

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) return sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0);  // inf, nan
  if (abs >= 0x477ff000) return sign | 0x7c00;                                   // overflow
  if (abs < 0x38800000) {  // subnormal or zero: round to nearest even on the shifted mantissa
    float magnitude;
    std::memcpy(&magnitude, &abs, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 16777216.0f));  // 2^24
  }
  uint32_t rounded = abs + 0xfff + ((abs >> 13) & 1);  // round to nearest even
  return sign | static_cast<uint16_t>((rounded - 0x38000000) >> 13);
}

float bfloat16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // nan stays nan
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

namespace {

// Applies `fn(float) -> float` to every element of a 16-bit float buffer.
template <typename Fn>
void map_half(void* data, size_t count, DataType dtype, Fn fn) {
  auto* p = static_cast<uint16_t*>(data);
  bool bf = dtype == DataType::kBFloat16;
  for (size_t i = 0; i < count; ++i) {
    float v = bf ? bfloat16_to_float(p[i]) : half_to_float(p[i]);
    v = fn(v, i);
    p[i] = bf ? float_to_bfloat16(v) : float_to_half(v);
  }
}

template <typename T>
void scale_typed(void* data, size_t count, double factor) {
  auto* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] * factor);
}

template <typename T>
T combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return static_cast<T>(a + b);
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kProduct: return static_cast<T>(a * b);
  }
  return a;
}

template <typename T>
void reduce_typed(void* inout, const void* in, size_t count, ReduceOp op) {
  auto* a = static_cast<T*>(inout);
  const auto* b = static_cast<const T*>(in);
  for (size_t i = 0; i < count; ++i) a[i] = combine(a[i], b[i], op);
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
    case DataType::kBFloat16:
      return map_half(data, count, dtype, [factor](float v, size_t) { return static_cast<float>(v * factor); });
  }
}

void reduce_into(void* inout, const void* in, size_t count, DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::kFloat32: return reduce_typed<float>(inout, in, count, op);
    case DataType::kFloat64: return reduce_typed<double>(inout, in, count, op);
    case DataType::kInt32: return reduce_typed<int32_t>(inout, in, count, op);
    case DataType::kInt64: return reduce_typed<int64_t>(inout, in, count, op);
    case DataType::kUInt8: return reduce_typed<uint8_t>(inout, in, count, op);
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const auto* b = static_cast<const uint16_t*>(in);
      bool bf = dtype == DataType::kBFloat16;
      return map_half(inout, count, dtype, [&](float v, size_t i) {
        return combine(v, bf ? bfloat16_to_float(b[i]) : half_to_float(b[i]), op);
      });
    }
  }
}

}  // namespace edt::engine
