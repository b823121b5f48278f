#include "launcher/elastic_driver.h"

#include <gtest/gtest.h>

namespace edt::launcher {
namespace {

TEST(DiscoveredHosts, BareHostsGetSlotsPerHost) {
  auto hosts = parse_discovered_hosts("# the cluster\nnode-a:4\nnode-b\n\n10.0.0.7   # gpu box\n", 2);
  ASSERT_TRUE(hosts.is_ok()) << hosts.status().to_string();
  EXPECT_EQ(hosts.value(), (std::vector<HostSlots>{{"node-a", 4}, {"node-b", 2}, {"10.0.0.7", 2}}));
}

TEST(DiscoveredHosts, ErrorsNameTheScriptOutputAndLine) {
  auto hosts = parse_discovered_hosts("node-a:4\nnode-b:x\n", 1);
  ASSERT_FALSE(hosts.is_ok());
  EXPECT_NE(hosts.status().message().find("discovery script"), std::string::npos) << hosts.status().message();
  EXPECT_NE(hosts.status().message().find(":2"), std::string::npos) << hosts.status().message();
  EXPECT_FALSE(parse_discovered_hosts("node-a\nnode-a\n", 1).is_ok());  // listed twice
}

}  // namespace
}  // namespace edt::launcher
