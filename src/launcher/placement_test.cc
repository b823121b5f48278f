#include "launcher/placement.h"

#include <gtest/gtest.h>

namespace edt::launcher {
namespace {

TEST(Placement, FillsHostsInOrderWithConsecutiveRanks) {
  auto slots = assign_slots({{"a", 2}, {"b", 3}, {"c", 2}}, 6, "-H");
  ASSERT_TRUE(slots.is_ok()) << slots.status().to_string();
  ASSERT_EQ(slots->size(), 6u);
  const char* hosts[] = {"a", "a", "b", "b", "b", "c"};
  int local_ranks[] = {0, 1, 0, 1, 2, 0};
  int local_sizes[] = {2, 2, 3, 3, 3, 1};
  for (int r = 0; r < 6; ++r) {
    const SlotInfo& s = slots.value()[r];
    EXPECT_EQ(s.rank, r);
    EXPECT_EQ(s.size, 6);
    EXPECT_EQ(s.host, hosts[r]);
    EXPECT_EQ(s.local_rank, local_ranks[r]);
    EXPECT_EQ(s.local_size, local_sizes[r]);
  }
  EXPECT_EQ(slots.value()[5].host_index, 2);
}

TEST(Placement, CrossRanksGroupEqualLocalRanksAcrossHosts) {
  // a:2 b:1 c:2 with 5 ranks: local rank 0 on a, b, c; local rank 1 on a, c.
  auto slots = assign_slots({{"a", 2}, {"b", 1}, {"c", 2}}, 5, "-H");
  ASSERT_TRUE(slots.is_ok());
  int cross_ranks[] = {0, 0, 1, 2, 1};
  int cross_sizes[] = {3, 2, 3, 3, 2};
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(slots.value()[r].cross_rank, cross_ranks[r]) << r;
    EXPECT_EQ(slots.value()[r].cross_size, cross_sizes[r]) << r;
  }
}

TEST(Placement, FewerRanksThanSlotsLeavesLaterHostsOut) {
  auto slots = assign_slots({{"a", 4}, {"b", 4}}, 3, "-H");
  ASSERT_TRUE(slots.is_ok());
  for (const auto& s : slots.value()) {
    EXPECT_EQ(s.host, "a");
    EXPECT_EQ(s.local_size, 3);
    EXPECT_EQ(s.cross_size, 1);
  }
}

TEST(Placement, TooManyRanksSaysHowManySlotsAndWhere) {
  auto slots = assign_slots({{"a", 2}, {"b", 1}}, 4, "--hostfile /etc/mpi/hostfile");
  ASSERT_FALSE(slots.is_ok());
  const std::string& m = slots.status().message();
  EXPECT_NE(m.find("-np 4"), std::string::npos) << m;
  EXPECT_NE(m.find("3 slots of --hostfile /etc/mpi/hostfile (a:2,b:1)"), std::string::npos) << m;
}

TEST(Placement, ZeroOrNegativeRanksIsAnError) {
  for (int np : {0, -1}) {
    auto slots = assign_slots({{"a", 2}}, np, "-H");
    ASSERT_FALSE(slots.is_ok());
    EXPECT_NE(slots.status().message().find("at least 1"), std::string::npos);
  }
}

}  // namespace
}  // namespace edt::launcher
