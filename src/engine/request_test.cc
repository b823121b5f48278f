#include "engine/request.h"

#include <gtest/gtest.h>

namespace edt::engine {
namespace {

TEST(RequestTest, ShapesAndNames) {
  EXPECT_EQ(shape_string({2, 3}), "[2, 3]");
  EXPECT_EQ(shape_string({}), "[]");
  EXPECT_EQ(num_elements({2, 3, 4}), 24);
  EXPECT_EQ(num_elements({}), 1);
  EXPECT_STREQ(op_name(ReduceOp::kAverage), "Average");
}

}  // namespace
}  // namespace edt::engine
