#include "engine/types.h"

#include <gtest/gtest.h>

#include "collectives/reduce.h"

namespace edt::engine {
namespace {

TEST(TypesTest, ScaleEveryType) {
  std::vector<uint16_t> h = {collectives::float_to_half(1.5f), collectives::float_to_half(-2.0f)};
  scale_buffer(h.data(), 2, DataType::kFloat16, 2.0);
  EXPECT_EQ(collectives::half_to_float(h[0]), 3.0f);
  EXPECT_EQ(collectives::half_to_float(h[1]), -4.0f);
  std::vector<uint16_t> b = {collectives::float_to_bfloat16(3.0f)};
  scale_buffer(b.data(), 1, DataType::kBFloat16, 0.5);
  EXPECT_EQ(collectives::bfloat16_to_float(b[0]), 1.5f);
  std::vector<int32_t> i = {7, -7};
  scale_buffer(i.data(), 2, DataType::kInt32, 0.5);
  EXPECT_EQ(i, (std::vector<int32_t>{3, -3}));
  std::vector<double> d = {1.0};
  scale_buffer(d.data(), 1, DataType::kFloat64, 0.25);
  EXPECT_EQ(d[0], 0.25);
}

TEST(TypesTest, ShapesAndNames) {
  EXPECT_EQ(shape_string({2, 3}), "[2, 3]");
  EXPECT_EQ(shape_string({}), "[]");
  EXPECT_EQ(num_elements({2, 3, 4}), 24);
  EXPECT_EQ(num_elements({}), 1);
  EXPECT_STREQ(op_name(ReduceOp::kAverage), "Average");
}

}  // namespace
}  // namespace edt::engine
