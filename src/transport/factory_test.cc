#include "transport/factory.h"

#include <gtest/gtest.h>

namespace edt::transport {
namespace {

std::vector<PeerInfo> on_hosts(const std::vector<std::string>& hosts) {
  std::vector<PeerInfo> peers;
  for (const auto& h : hosts) peers.push_back(PeerInfo{.host = h, .address = {}, .process = {}});
  return peers;
}

TransportPlan plan(TransportKind kind, const std::vector<std::string>& hosts, int rank) {
  auto made = plan_transport(kind, compute_topology(hosts, rank), on_hosts(hosts));
  EXPECT_TRUE(made.is_ok()) << made.status().to_string();
  return made.is_ok() ? *made : TransportPlan{};
}

TEST(TransportFactory, ParsesTheThreeKindsOnly) {
  EXPECT_EQ(parse_transport_kind("auto").value(), TransportKind::kAuto);
  EXPECT_EQ(parse_transport_kind("tcp").value(), TransportKind::kTcp);
  EXPECT_EQ(parse_transport_kind("shm").value(), TransportKind::kShm);
  auto bad = parse_transport_kind("ib");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("EDT_TRANSPORT"), std::string::npos);
}

TEST(TransportFactory, AutoUsesSharedMemoryInsideAHostAndTcpAcross) {
  EXPECT_EQ(plan(TransportKind::kAuto, {"a", "a"}, 0).name, "shm");
  EXPECT_EQ(plan(TransportKind::kAuto, {"a", "b"}, 0).name, "tcp");
  EXPECT_EQ(plan(TransportKind::kAuto, {"a"}, 0).name, "none");
  TransportPlan both = plan(TransportKind::kAuto, {"a", "a", "b", "b"}, 0);
  EXPECT_EQ(both.name, "shm+tcp");
  EXPECT_TRUE(both.hierarchical);
  EXPECT_FALSE(plan(TransportKind::kAuto, {"a", "b"}, 0).hierarchical) << "one rank per host: flat";
}

// A rank alone on its host has no shared memory, but the group still runs
// hierarchically because another host has several ranks.
TEST(TransportFactory, HierarchicalIsAPropertyOfTheGroup) {
  TransportPlan alone = plan(TransportKind::kAuto, {"a", "a", "b"}, 2);
  EXPECT_FALSE(alone.shm);
  EXPECT_TRUE(alone.tcp);
  EXPECT_TRUE(alone.hierarchical);
}

TEST(TransportFactory, TcpEverywhereWhenAsked) {
  TransportPlan tcp = plan(TransportKind::kTcp, {"a", "a", "b", "b"}, 1);
  EXPECT_EQ(tcp.name, "tcp");
  EXPECT_FALSE(tcp.shm);
  EXPECT_FALSE(tcp.hierarchical);
}

TEST(TransportFactory, ShmRefusesSeveralHostsNamingThem) {
  const std::vector<std::string> hosts{"a", "b"};
  auto made = plan_transport(TransportKind::kShm, compute_topology(hosts, 0), on_hosts(hosts));
  ASSERT_FALSE(made.is_ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(made.status().message().find("2 hosts (a, b, ...)"), std::string::npos) << made.status().message();
}

TEST(TransportFactory, DefaultSpinIsShortWhenRanksShareCores) {
  EXPECT_EQ(default_spin(1), std::chrono::milliseconds(5));
  EXPECT_EQ(default_spin(1 << 20), std::chrono::microseconds(2));
}

}  // namespace
}  // namespace edt::transport
