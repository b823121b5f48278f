#include "transport/topology.h"

#include <gtest/gtest.h>

namespace edt::transport {
namespace {

using Ranks = std::vector<int>;

TEST(Topology, OneHost) {
  Topology t = compute_topology({"a", "a", "a"}, 2);
  EXPECT_EQ(t.hosts(), 1);
  EXPECT_EQ(t.host_index, 0);
  EXPECT_EQ(t.local_members, (Ranks{0, 1, 2}));
  EXPECT_EQ(t.local_rank, 2);
  EXPECT_EQ(t.leaders, (Ranks{0}));
  EXPECT_EQ(t.cross_rank, 0);
  EXPECT_EQ(t.cross_size, 1);
  EXPECT_EQ(t.largest_host, 3);
}

TEST(Topology, TwoHostsOfTwo) {
  const std::vector<std::string> hosts{"a", "a", "b", "b"};
  Topology t = compute_topology(hosts, 3);
  EXPECT_EQ(t.host_index, 1);
  EXPECT_EQ(t.host_of, (Ranks{0, 0, 1, 1}));
  EXPECT_EQ(t.leaders, (Ranks{0, 2}));
  EXPECT_EQ(t.local_members, (Ranks{2, 3}));
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.cross_rank, 1);
  EXPECT_EQ(t.cross_size, 2);
  EXPECT_EQ(t.largest_host, 2);
  EXPECT_EQ(compute_topology(hosts, 0).cross_rank, 0);
}

// Horovod's cross communicator holds one rank per host that has a rank with
// this local rank: with 3 ranks on a and 1 on b, local rank 2 is alone.
TEST(Topology, UnevenHostsCountCrossRanksOnlyWhereTheLocalRankExists) {
  const std::vector<std::string> hosts{"a", "a", "a", "b"};
  Topology third = compute_topology(hosts, 2);
  EXPECT_EQ(third.local_rank, 2);
  EXPECT_EQ(third.cross_rank, 0);
  EXPECT_EQ(third.cross_size, 1);
  Topology on_b = compute_topology(hosts, 3);
  EXPECT_EQ(on_b.local_rank, 0);
  EXPECT_EQ(on_b.cross_rank, 1);
  EXPECT_EQ(on_b.cross_size, 2);
  EXPECT_EQ(on_b.largest_host, 3);
}

TEST(Topology, HostsNumberedByFirstAppearanceAndLedByTheirLowestRank) {
  Topology t = compute_topology({"b", "a", "b", "c"}, 2);
  EXPECT_EQ(t.host_of, (Ranks{0, 1, 0, 2}));
  EXPECT_EQ(t.leaders, (Ranks{0, 1, 3}));
  EXPECT_EQ(t.local_members, (Ranks{0, 2}));
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.cross_rank, 0);
  EXPECT_EQ(t.cross_size, 1);
}

}  // namespace
}  // namespace edt::transport
