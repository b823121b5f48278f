#include "control/backends/local/local_backend.h"

#include <gtest/gtest.h>

namespace edt::control {
namespace {

// The first host id of `range` from 2^28; -1 for an error.
int64_t first_of(int64_t range) {
  auto ids = subordinate_ids(1u << 28, range);
  return ids.is_ok() ? int64_t{*ids} : -1;
}

TEST(SubordinateIdsTest, EachRangeIs65536IdsFromTheFirst) {
  EXPECT_EQ(first_of(1), 1 << 28);
  EXPECT_EQ(first_of(2), (1 << 28) + 65536);
  // The last range that fits below 2^32 - 1 (which is no id), and the next.
  const int64_t last = ((int64_t{1} << 32) - (int64_t{1} << 28)) / 65536 - 1;
  EXPECT_EQ(first_of(last), (int64_t{1} << 32) - 2 * 65536);
  auto past = subordinate_ids(1u << 28, last + 1);
  ASSERT_FALSE(past.is_ok());
  EXPECT_NE(past.status().message().find("--user-namespaces"), std::string::npos) << past.status().message();
  EXPECT_EQ(first_of(0), -1);  // an owner with no range
}

}  // namespace
}  // namespace edt::control
