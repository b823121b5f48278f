#include "common/net.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace edt::net {
namespace {

TEST(ParseHostPort, HostsPortsAndTheirErrors) {
  auto v4 = parse_host_port("127.0.0.1:29400");
  ASSERT_TRUE(v4.is_ok());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 29400);
  auto v6 = parse_host_port("[::1]:5");
  ASSERT_TRUE(v6.is_ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 5);
  for (const char* bad : {"127.0.0.1", ":80", "host:http", "host:70000", "host:", "[::1]5", "host:0"})
    EXPECT_FALSE(parse_host_port(bad).is_ok()) << bad;
  // Port 0 (any free port) only where the caller allows it.
  auto any = parse_host_port("localhost:0", /*allow_port_zero=*/true);
  ASSERT_TRUE(any.is_ok());
  EXPECT_EQ(any->port, 0);
  EXPECT_FALSE(parse_host_port("localhost:65536", true).is_ok());
}

// A free port is one the kernel would not hand out by itself, and that a
// server can then bind.
TEST(FreePort, IsOutsideTheEphemeralRangeAndBindable) {
  const auto [low, high] = ephemeral_range();
  for (int i = 0; i < 20; ++i) {
    auto port = free_port("127.0.0.1");
    ASSERT_TRUE(port.is_ok()) << port.status().to_string();
    EXPECT_TRUE(*port < low || *port > high) << *port << " is in " << low << "-" << high;
    auto fd = listen_tcp("127.0.0.1", *port);
    ASSERT_TRUE(fd.is_ok()) << fd.status().to_string();
    ::close(*fd);
  }
  EXPECT_FALSE(free_port("192.0.2.1").is_ok()) << "not an address of this machine";
}

}  // namespace
}  // namespace edt::net
