// Reduce kernels: combine two buffers element by element, for every DataType
// and ReduceOp. float16 and bfloat16 are widened to float, combined and
// rounded back to nearest-even, one pair at a time. Integers wrap on
// overflow. kAverage combines as kSum; finish_average() divides at the end.
#pragma once

#include <cstddef>
#include <cstdint>

#include "edt/types.h"

namespace edt::kernels {

// dst[i] = dst[i] op src[i]. dst and src may not overlap (unless equal).
void reduce_into(void* dst, const void* src, size_t count, DataType type, ReduceOp op);

// dst[i] = a[i] op b[i]. dst may equal a or b.
void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op);

// buf[i] /= ranks (integers truncate toward zero).
void finish_average(void* buf, size_t count, DataType type, int ranks);

// buf[i] *= factor: floating types multiply in their own precision (float
// for float32, float16 and bfloat16), at memory speed; integers go through
// double and truncate toward zero.
void scale(void* buf, size_t count, DataType type, double factor);

// The op that combines partial results: kAverage combines as kSum.
inline ReduceOp combining_op(ReduceOp op) { return op == ReduceOp::kAverage ? ReduceOp::kSum : op; }

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even; NaN stays NaN
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);  // round to nearest even; NaN stays NaN

}  // namespace edt::kernels
