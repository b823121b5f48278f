#include "control/backends/local/container_network.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace edt::control {
namespace {

// What `nft -j list ruleset` prints on a host with Docker's iptables (nft
// backend) and an edtd's own tables for bridge edt0.
const char* kDockerHost = R"({"nftables": [
  {"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}},
  {"table": {"family": "ip", "name": "filter", "handle": 1}},
  {"chain": {"family": "ip", "table": "filter", "name": "FORWARD", "handle": 2, "type": "filter",
             "hook": "forward", "prio": 0, "policy": "drop"}},
  {"chain": {"family": "ip", "table": "filter", "name": "DOCKER-USER", "handle": 7}},
  {"chain": {"family": "ip", "table": "filter", "name": "INPUT", "handle": 1, "type": "filter",
             "hook": "input", "prio": 0, "policy": "drop"}},
  {"table": {"family": "inet", "name": "edt_edt0", "handle": 3}},
  {"chain": {"family": "inet", "table": "edt_edt0", "name": "forward", "handle": 2, "type": "filter",
             "hook": "forward", "prio": 0, "policy": "drop"}},
  {"chain": {"family": "inet", "table": "fw", "name": "fwd", "handle": 4, "type": "filter",
             "hook": "forward", "prio": 0, "policy": "accept"}},
  {"chain": {"family": "bridge", "table": "br", "name": "fwd", "handle": 5, "type": "filter",
             "hook": "forward", "prio": 0, "policy": "drop"}}
]})";

TEST(ContainerNetworkTest, FindsAnotherTablesForwardChainThatDropsByDefault) {
  // Docker's FORWARD; not an input chain, not a chain without a hook, not
  // edtd's own table, not one that accepts, not the bridge family (which
  // br_netfilter does not feed).
  EXPECT_EQ(ContainerNetwork::forward_drop_chains(kDockerHost, "edt0"),
            std::vector<std::string>{"ip filter FORWARD"});
  // Another edtd's table (another bridge) is another table.
  EXPECT_EQ(ContainerNetwork::forward_drop_chains(kDockerHost, "edt1"),
            (std::vector<std::string>{"ip filter FORWARD", "inet edt_edt0 forward"}));
}

TEST(ContainerNetworkTest, ARulesetWithoutSuchAChainOrNotJsonFindsNothing) {
  EXPECT_TRUE(ContainerNetwork::forward_drop_chains(R"({"nftables": [{"metainfo": {}}]})", "edt0").empty());
  for (const char* bad : {"", "not json", "[]", R"({"nftables": 3})", R"({"nftables": [1, {"chain": 2}]})"})
    EXPECT_TRUE(ContainerNetwork::forward_drop_chains(bad, "edt0").empty()) << bad;
}

TEST(ContainerNetworkTest, AContainersNamesComeFromItsAddress) {
  // The same address, the same MAC: a restarted container keeps its peers'
  // neighbour entries true. Locally administered, unicast, one per address.
  EXPECT_EQ(ContainerNetwork::container_mac("198.19.0.2"), "02:ed:c6:13:00:02");
  EXPECT_EQ(ContainerNetwork::container_mac("10.255.1.254"), "02:ed:0a:ff:01:fe");
  EXPECT_NE(ContainerNetwork::container_mac("198.19.0.2"), ContainerNetwork::container_mac("198.19.0.3"));
  EXPECT_EQ(ContainerNetwork::host_interface("198.19.0.2"), "edtvc6130002");
}

TEST(ContainerNetworkTest, ABridgeIsOneEdtdsAtATime) {
  if (geteuid() != 0) GTEST_SKIP() << "the bridge's lock is under /run/edt, root's";
  const std::string bridge = "edtut" + std::to_string(getpid() % 100000);
  ASSERT_TRUE(ContainerNetwork::claim_bridge(bridge, "/data/one").is_ok());
  // Another process (another edtd) is refused, told whose it is; the lock
  // is per process, so it is asked from a child.
  const pid_t child = fork();
  if (child == 0) {
    Status st = ContainerNetwork::claim_bridge(bridge, "/data/two");
    const std::string& m = st.message();
    _exit(!st.is_ok() && m.find("another edtd runs on that bridge (data dir /data/one, pid " +
                                std::to_string(getppid()) + ")") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::remove(("/run/edt/bridge-" + bridge + ".lock").c_str());
}

TEST(ContainerNetworkTest, TheBridgeTablePassesFramesOnlyBetweenOneClustersPorts) {
  const std::string table = ContainerNetwork::bridge_table(
      "edt0", {{"alice-c", {"198.19.0.2", "198.19.0.3"}}, {"bob-c", {"198.19.0.4"}}});
  EXPECT_NE(table.find("set p0 { type ifname; comment \"alice-c\"; elements = { \"edtvc6130002\", \"edtvc6130003\" } }"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("set p1 { type ifname; comment \"bob-c\"; elements = { \"edtvc6130004\" } }"), std::string::npos)
      << table;
  // ARP and IPv4 each need both ports and both addresses of one cluster: a
  // flooded ARP request reaches no port of another cluster.
  for (const char* rule : {"iifname @p0 oifname @p0 arp saddr ip @c0 arp daddr ip @c0 accept",
                           "iifname @p0 oifname @p0 ip saddr @c0 ip daddr @c0 accept",
                           "iifname @p1 oifname @p1 arp saddr ip @c1 arp daddr ip @c1 accept",
                           "iifname @p1 oifname @p1 ip saddr @c1 ip daddr @c1 accept"})
    EXPECT_NE(table.find(rule), std::string::npos) << rule << "\n" << table;
  EXPECT_NE(table.find("accept\n    drop\n  }\n}\n"), std::string::npos) << table;
  // And nft takes it (checked, not loaded), where this test may ask it.
  if (geteuid() != 0 || ::access("/usr/sbin/nft", X_OK) != 0) return;
  const std::string path = ::testing::TempDir() + "/bridge_table.nft";
  std::ofstream(path) << table;
  EXPECT_EQ(std::system(("/usr/sbin/nft -c -f " + path).c_str()), 0) << table;
  std::filesystem::remove(path);
}

TEST(ContainerNetworkTest, ModesAndBridgeNames) {
  EXPECT_EQ(ContainerNetwork::parse_mode("loopback").value(), "");
  EXPECT_EQ(ContainerNetwork::parse_mode("bridge").value(), "edt0");
  EXPECT_EQ(ContainerNetwork::parse_mode("bridge:edt_a1").value(), "edt_a1");
  for (const char* bad : {"", "host", "bridge:", "bridge:a-b", "bridge:0123456789abcdef", "bridge:a b"}) {
    auto r = ContainerNetwork::parse_mode(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("--network"), std::string::npos) << r.status().message();
  }
}

// Macvlan mode (a Slurm node): the peers are the cluster's hosts file's
// addresses and the login address; localhost is not a peer.
TEST(ContainerNetworkTest, MacvlanPeersAreTheClusterAndTheLoginNode) {
  char top[] = "/tmp/edt-net-test-XXXXXX";
  ASSERT_NE(mkdtemp(top), nullptr);
  const std::string dir = top;
  std::filesystem::create_directories(dir + "/clusters/c/mpi");
  std::filesystem::create_directories(dir + "/containers");
  std::ofstream(dir + "/clusters/c/mpi/hosts") << "127.0.0.1\tlocalhost\n10.0.0.9\tc-worker-0\n10.0.0.3\tc-launcher\n";
  ContainerNetworkOptions options;
  options.containers_dir = dir + "/containers";
  options.parent = "eth0";
  options.login_address = "10.0.0.1";
  ContainerNetwork network(options);
  EXPECT_EQ(network.cluster_peers("c"), (std::vector<std::string>{"10.0.0.3", "10.0.0.9"}));
  // A cluster without a hosts file yet: none.
  EXPECT_EQ(network.cluster_peers("d"), std::vector<std::string>{});
  std::filesystem::remove_all(dir);
}

TEST(ContainerNetworkTest, MacvlanFilterLetsInItsPeersAndReplies) {
  const std::string filter = ContainerNetwork::macvlan_filter({"10.0.0.3", "10.0.0.9"}, "10.0.0.1", "10.0.0.0/25");
  EXPECT_NE(filter.find("policy drop;"), std::string::npos) << filter;
  EXPECT_NE(filter.find("ct state established,related accept"), std::string::npos) << filter;
  EXPECT_NE(filter.find("ip saddr { 10.0.0.3, 10.0.0.9, 10.0.0.1 } accept"), std::string::npos) << filter;
  // Out: its peers, then nothing new to the login node or the rest of the range.
  const size_t out = filter.find("chain output");
  ASSERT_NE(out, std::string::npos) << filter;
  const size_t peers = filter.find("ip daddr { 10.0.0.3, 10.0.0.9 } accept", out);
  const size_t dropped = filter.find("ip daddr { 10.0.0.1 } drop\n    ip daddr { 10.0.0.0/25 } drop", out);
  EXPECT_NE(peers, std::string::npos) << filter;
  EXPECT_NE(dropped, std::string::npos) << filter;
  EXPECT_LT(peers, dropped) << filter;
  // Replaced whole: the old table goes in the same load.
  EXPECT_EQ(filter.find("table inet edt_container\ndelete table inet edt_container\n"), 0u) << filter;
  // No peer, no login node, no range: no empty set (nft refuses one), nothing let in.
  const std::string bare = ContainerNetwork::macvlan_filter({}, "", "");
  EXPECT_EQ(bare.find("saddr"), std::string::npos) << bare;
  EXPECT_EQ(bare.find("daddr"), std::string::npos) << bare;
}

}  // namespace
}  // namespace edt::control
