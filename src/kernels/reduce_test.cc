#include "kernels/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace edt::kernels {
namespace {

// Reference: double precision, then rounded to the type once.
double ref_op(double a, double b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return a + b;
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kProduct: return a * b;
  }
  return 0;
}

TEST(HalfConversion, KnownValues) {
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // rounds up to infinity
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(float_to_half(0x1.0p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(0x1.0p-26f), 0x0000);  // below half of it: zero
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  // Ties go to even: 2049 lies between 2048 and 2050 (spacing 2 there).
  EXPECT_EQ(half_to_float(float_to_half(2049.0f)), 2048.0f);
  EXPECT_EQ(half_to_float(float_to_half(2051.0f)), 2052.0f);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_to_float(0x0001), 0x1.0p-24f);
}

TEST(HalfConversion, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_half(f), h) << std::hex << h;
  }
}

TEST(HalfConversion, RoundsToNearestAgainstDouble) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) {
    float f = dist(rng) * (i % 2 ? 1.0f : 1e-4f);
    uint16_t h = float_to_half(f);
    double got = half_to_float(h);
    if (std::isinf(got)) continue;
    // No other half is closer.
    for (int d : {-1, 1}) {
      double other = half_to_float(static_cast<uint16_t>(h + d));
      if (std::isnan(other) || ((h + d) & 0x7FFF) == 0x7C00 || ((h ^ (h + d)) & 0x8000)) continue;
      EXPECT_LE(std::abs(got - double(f)), std::abs(other - double(f))) << f;
    }
  }
}

TEST(BFloat16Conversion, KnownValuesAndTiesToEven) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3F80);
  EXPECT_EQ(bfloat16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(float_to_bfloat16(-3.0f), 0xC040);
  // 1 + 2^-8 is exactly between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1.0p-8f), 0x3F80);
  // 1 + 3 * 2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * 0x1.0p-8f), 0x3F82);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::infinity()), 0x7F80);
}

// Fills element i of a typed buffer from a double and reads it back.
void put(DataType t, void* p, size_t i, double v) {
  switch (t) {
    case DataType::kFloat32: static_cast<float*>(p)[i] = float(v); break;
    case DataType::kFloat64: static_cast<double*>(p)[i] = v; break;
    case DataType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_half(float(v)); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bfloat16(float(v)); break;
    case DataType::kInt32: static_cast<int32_t*>(p)[i] = int32_t(v); break;
    case DataType::kInt64: static_cast<int64_t*>(p)[i] = int64_t(v); break;
    case DataType::kUInt8: static_cast<uint8_t*>(p)[i] = uint8_t(v); break;
  }
}
double get(DataType t, const void* p, size_t i) {
  switch (t) {
    case DataType::kFloat32: return static_cast<const float*>(p)[i];
    case DataType::kFloat64: return static_cast<const double*>(p)[i];
    case DataType::kFloat16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DataType::kBFloat16: return bfloat16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DataType::kInt32: return static_cast<const int32_t*>(p)[i];
    case DataType::kInt64: return double(static_cast<const int64_t*>(p)[i]);
    case DataType::kUInt8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}
// The reference result as the type stores it (rounded once from double).
double stored(DataType t, double v) {
  std::vector<uint8_t> b(8);
  put(t, b.data(), 0, v);
  return get(t, b.data(), 0);
}

class KernelTest : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(KernelTest, MatchesDoubleReference) {
  auto [type, op] = GetParam();
  const bool is_float = type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kFloat16 ||
                        type == DataType::kBFloat16;
  std::mt19937 rng(11);
  // Small integers keep integer sums and products in range; floats get
  // fractions so rounding matters.
  std::uniform_int_distribution<int> small(type == DataType::kUInt8 ? 0 : -9, 9);
  // Multiples of 2^-8 below 4: every sum and product of two of them is exact
  // in float, so float16/bfloat16 results are rounded exactly once.
  std::uniform_int_distribution<int> eighths(-1023, 1023);
  auto frac = [&](std::mt19937& r) { return eighths(r) / 256.0; };
  for (size_t count : {0, 1, 3, 7, 16, 33, 1000, 4099}) {
    const size_t es = dtype_size(type);
    std::vector<uint8_t> a(count * es + 1), b(count * es + 1), out(count * es + 1), inplace;
    for (size_t i = 0; i < count; ++i) {
      put(type, a.data(), i, is_float ? frac(rng) : small(rng));
      put(type, b.data(), i, is_float ? frac(rng) : small(rng));
    }
    reduce(out.data(), a.data(), b.data(), count, type, op);
    inplace = a;
    reduce_into(inplace.data(), b.data(), count, type, op);
    for (size_t i = 0; i < count; ++i) {
      double want = ref_op(get(type, a.data(), i), get(type, b.data(), i), op);
      if (type == DataType::kUInt8) want = double(uint8_t(int(want) & 0xff));
      // float32 rounds the double result once; f16/bf16 compute in float
      // (exact for these operands) then round once: both equal stored().
      ASSERT_EQ(get(type, out.data(), i), stored(type, want)) << "element " << i << " count " << count;
      ASSERT_EQ(get(type, inplace.data(), i), stored(type, want)) << "element " << i;
    }
  }
}

TEST(Kernels, FinishAverageDividesEveryType) {
  for (DataType type : kAllDataTypes) {
    const size_t es = dtype_size(type);
    std::vector<uint8_t> buf(5 * es);
    for (size_t i = 0; i < 5; ++i) put(type, buf.data(), i, double(i * 3 + (i == 4 ? 2 : 0)));
    finish_average(buf.data(), 5, type, 3);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(get(type, buf.data(), i), double(i)) << dtype_name(type);
    // 14 / 3: floats keep the fraction (rounded to the type), integers truncate.
    const bool is_int = type == DataType::kInt32 || type == DataType::kInt64 || type == DataType::kUInt8;
    EXPECT_EQ(get(type, buf.data(), 4), is_int ? 4.0 : stored(type, 14.0 / 3.0)) << dtype_name(type);
  }
}

std::string Name(const ::testing::TestParamInfo<KernelTest::ParamType>& info) {
  return std::string(dtype_name(std::get<0>(info.param))) + "_" + reduce_op_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, KernelTest,
                         ::testing::Combine(::testing::ValuesIn(kAllDataTypes), ::testing::ValuesIn(kAllReduceOps)),
                         Name);

TEST(Kernels, ScaleEveryType) {
  std::vector<uint16_t> h = {float_to_half(1.5f), float_to_half(-2.0f)};
  scale(h.data(), 2, DataType::kFloat16, 2.0);
  EXPECT_EQ(half_to_float(h[0]), 3.0f);
  EXPECT_EQ(half_to_float(h[1]), -4.0f);
  std::vector<uint16_t> b = {float_to_bfloat16(3.0f)};
  scale(b.data(), 1, DataType::kBFloat16, 0.5);
  EXPECT_EQ(bfloat16_to_float(b[0]), 1.5f);
  std::vector<int32_t> i = {7, -7};
  scale(i.data(), 2, DataType::kInt32, 0.5);
  EXPECT_EQ(i, (std::vector<int32_t>{3, -3}));
  std::vector<double> d = {1.0};
  scale(d.data(), 1, DataType::kFloat64, 0.25);
  EXPECT_EQ(d[0], 0.25);
  std::vector<float> f(1001, 3.0f);  // past any vector width, with a tail
  scale(f.data(), f.size(), DataType::kFloat32, 1.0 / 3);
  for (float v : f) EXPECT_FLOAT_EQ(v, 1.0f);
}

TEST(Kernels, SignedOverflowWraps) {
  int32_t a[2] = {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
  int32_t b[2] = {1, -1};
  reduce_into(a, b, 2, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(a[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(a[1], std::numeric_limits<int32_t>::max());
}

TEST(Types, NamesParseBack) {
  for (DataType t : kAllDataTypes) EXPECT_EQ(parse_dtype(dtype_name(t)).value(), t);
  for (ReduceOp op : kAllReduceOps) EXPECT_EQ(parse_reduce_op(reduce_op_name(op)).value(), op);
  EXPECT_EQ(parse_dtype("bf16").value(), DataType::kBFloat16);
  EXPECT_EQ(parse_reduce_op("avg").value(), ReduceOp::kAverage);
  auto bad = parse_dtype("float8");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bfloat16"), std::string::npos);
  EXPECT_EQ(parse_reduce_op("xor").status().code(), StatusCode::kInvalidArgument);
}

// The transport reduces straight from a channel's byte buffer, where an
// element may start at any address: each operand at an odd offset (a typed
// access there was undefined behaviour, which UBSan reported).
TEST(Reduce, ElementsAtAnyByteOffset) {
  const size_t count = 37;
  std::vector<uint8_t> a(count * 8 + 3), b(count * 8 + 3), dst(count * 8 + 3);
  for (size_t i = 0; i < count; ++i) {
    const int64_t x = int64_t(i) - 5, y = 1000 * int64_t(i);
    std::memcpy(a.data() + 1 + i * 8, &x, 8);
    std::memcpy(b.data() + 3 + i * 8, &y, 8);
  }
  reduce(dst.data() + 2, a.data() + 1, b.data() + 3, count, DataType::kInt64, ReduceOp::kSum);
  reduce_into(a.data() + 1, b.data() + 3, count, DataType::kInt64, ReduceOp::kSum);
  for (size_t i = 0; i < count; ++i) {
    int64_t sum, in_place;
    std::memcpy(&sum, dst.data() + 2 + i * 8, 8);
    std::memcpy(&in_place, a.data() + 1 + i * 8, 8);
    EXPECT_EQ(sum, 1001 * int64_t(i) - 5) << i;
    EXPECT_EQ(in_place, sum) << i;
  }
}

}  // namespace
}  // namespace edt::kernels
