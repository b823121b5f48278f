#include "engine/types.h"

#include <gtest/gtest.h>

#include <cmath>

namespace edt::engine {
namespace {

TEST(TypesTest, HalfRoundTripsRepresentableValues) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000060975552f, 1e-7f}) {
    EXPECT_EQ(half_to_float(float_to_half(v)), v == 1e-7f ? half_to_float(float_to_half(v)) : v);
  }
  EXPECT_NEAR(half_to_float(float_to_half(1e-7f)), 1.19e-7f, 1e-9f);  // subnormal
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 1.0f / 4096)), 1.0f);  // rounds to nearest even
}

TEST(TypesTest, BFloat16Rounds) {
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(3.0f)), 3.0f);
  EXPECT_NEAR(bfloat16_to_float(float_to_bfloat16(3.14159f)), 3.140625f, 1e-6);
}

TEST(TypesTest, ScaleAndReduceEveryType) {
  std::vector<uint16_t> h = {float_to_half(1.5f), float_to_half(-2.0f)};
  scale_buffer(h.data(), 2, DataType::kFloat16, 2.0);
  EXPECT_EQ(half_to_float(h[0]), 3.0f);
  EXPECT_EQ(half_to_float(h[1]), -4.0f);
  std::vector<int64_t> a = {1, 5}, b = {3, 2};
  reduce_into(a.data(), b.data(), 2, DataType::kInt64, ReduceOp::kMax);
  EXPECT_EQ(a, (std::vector<int64_t>{3, 5}));
  std::vector<uint8_t> u = {2, 7}, v = {3, 1};
  reduce_into(u.data(), v.data(), 2, DataType::kUInt8, ReduceOp::kMin);
  EXPECT_EQ(u, (std::vector<uint8_t>{2, 1}));
  EXPECT_EQ(shape_string({2, 3}), "[2, 3]");
  EXPECT_EQ(shape_string({}), "[]");
}

}  // namespace
}  // namespace edt::engine
