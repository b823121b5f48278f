// The element types and reduction operations the engine moves, with the
// helpers it needs on raw buffers: sizes, names (as error messages and
// Horovod print them) and in-place scaling for prescale/postscale factors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace edt::engine {

enum class DataType : uint8_t { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };
enum class ReduceOp : uint8_t { kSum, kAverage, kMin, kMax, kProduct };

size_t element_size(DataType dtype);
const char* dtype_name(DataType dtype);   // "float32", ...
const char* reduce_op_name(ReduceOp op);  // "Sum", "Average", ...

// "[2, 3]": a shape as Horovod's mismatch messages print it.
std::string shape_string(const std::vector<int64_t>& shape);
int64_t num_elements(const std::vector<int64_t>& shape);

// Multiplies `count` elements at `data` by `factor` in place. Integer types
// round toward zero, as Horovod's scaling of integer tensors does.
void scale_buffer(void* data, size_t count, DataType dtype, double factor);

// Reduces `count` elements of `in` into `inout` with `op` (kAverage sums;
// the caller divides).
void reduce_into(void* inout, const void* in, size_t count, DataType dtype, ReduceOp op);

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

}  // namespace edt::engine
