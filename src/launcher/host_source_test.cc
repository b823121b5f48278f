#include "launcher/host_source.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

namespace edt::launcher {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

fs::path temp_dir() {
  char pattern[] = "/tmp/edt-host-source-XXXXXX";
  return fs::path(mkdtemp(pattern));
}

bool readable_within(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

TEST(FixedHosts, GivesTheSameListEveryPoll) {
  FixedHosts source({{"a", 2}, {"b", 1}});
  for (int i = 0; i < 2; ++i) {
    auto hosts = source.poll();
    ASSERT_TRUE(hosts.is_ok());
    EXPECT_EQ(hosts.value(), (std::vector<HostSlots>{{"a", 2}, {"b", 1}}));
  }
  EXPECT_EQ(source.change_fd(), -1);
  EXPECT_FALSE(source.take_change());
}

TEST(WatchedHostfile, SeesAnAtomicReplaceAndIgnoresOtherFiles) {
  fs::path dir = temp_dir();
  std::string path = (dir / "hostfile").string();
  std::ofstream(path) << "a slots=2\n";
  WatchedHostfile source(path);
  ASSERT_EQ(source.poll().value(), (std::vector<HostSlots>{{"a", 2}}));
  ASSERT_GE(source.change_fd(), 0) << "no inotify here";

  std::ofstream(dir / "unrelated") << "x\n";
  ASSERT_TRUE(readable_within(source.change_fd(), 2000));
  EXPECT_FALSE(source.take_change());

  std::ofstream(dir / "hostfile.new") << "a slots=2\nb:3\n";
  fs::rename(dir / "hostfile.new", path);
  ASSERT_TRUE(readable_within(source.change_fd(), 2000));
  EXPECT_TRUE(source.take_change());
  EXPECT_EQ(source.poll().value(), (std::vector<HostSlots>{{"a", 2}, {"b", 3}}));
  EXPECT_FALSE(source.take_change());  // consumed

  fs::remove(path);
  EXPECT_FALSE(source.poll().is_ok());  // the caller keeps its last list
  fs::remove_all(dir);
}

DiscoveryScriptOptions script(const std::string& text) {
  DiscoveryScriptOptions options;
  options.script = text;
  options.slots_per_host = 2;
  options.env = {{"PATH", "/usr/bin:/bin"}, {"WHO", "node-c"}};
  return options;
}

TEST(DiscoveryScript, ParsesWhatTheScriptPrints) {
  DiscoveryScript source(script("echo node-a:4; echo $WHO"));
  auto hosts = source.poll();
  ASSERT_TRUE(hosts.is_ok()) << hosts.status().to_string();
  EXPECT_EQ(hosts.value(), (std::vector<HostSlots>{{"node-a", 4}, {"node-c", 2}}));
}

TEST(DiscoveryScript, ByDefaultItsIntervalFollowsTheScriptsCost) {
  DiscoveryScript fast(script("echo node-a"));
  EXPECT_EQ(fast.interval(), DiscoveryScript::kFastest);  // before any run
  ASSERT_TRUE(fast.poll().is_ok());
  EXPECT_EQ(fast.interval(), std::clamp(fast.last_run() * DiscoveryScript::kCostFactor, DiscoveryScript::kFastest,
                                        DiscoveryScript::kSlowest));
  // A run of 60 ms or more: 20 times that is past the slowest interval.
  DiscoveryScript slow(script("sleep 0.06; echo node-a"));
  ASSERT_TRUE(slow.poll().is_ok());
  EXPECT_GE(slow.last_run(), milliseconds(60));
  EXPECT_EQ(slow.interval(), DiscoveryScript::kSlowest);
  // After a failed run, however quick, the next waits the slowest interval.
  DiscoveryScript failing(script("exit 1"));
  EXPECT_FALSE(failing.poll().is_ok());
  EXPECT_EQ(failing.interval(), DiscoveryScript::kSlowest);
}

TEST(DiscoveryScript, AGivenIntervalIsKept) {
  DiscoveryScriptOptions options = script("sleep 0.06; echo node-a");
  options.interval = milliseconds(250);
  DiscoveryScript source(options);
  ASSERT_TRUE(source.poll().is_ok());
  EXPECT_EQ(source.interval(), milliseconds(250));
}

TEST(DiscoveryScript, AFailedRunIsAnErrorWithItsStderr) {
  DiscoveryScript source(script("echo node-a; echo no cluster >&2; exit 3"));
  auto hosts = source.poll();
  ASSERT_FALSE(hosts.is_ok());
  EXPECT_NE(hosts.status().message().find("exited with code 3: no cluster"), std::string::npos)
      << hosts.status().message();
}

TEST(DiscoveryScript, ARunPastItsTimeoutIsKilled) {
  DiscoveryScriptOptions options = script("echo node-a; sleep 30");
  options.timeout = milliseconds(200);
  DiscoveryScript source(options);
  auto started = std::chrono::steady_clock::now();
  auto hosts = source.poll();
  ASSERT_FALSE(hosts.is_ok());
  EXPECT_EQ(hosts.status().code(), StatusCode::kTimeout) << hosts.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

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
