#include "launcher/local_host.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace edt::launcher {
namespace {

TEST(LocalIdentity, LoopbackNamesHostnameAndInterfaceAddresses) {
  LocalIdentity local("node7.example.org", {"10.1.2.3", "fe80::1", "127.0.0.1"});
  for (const char* host : {"localhost", "127.0.0.1", "::1", "0:0:0:0:0:0:0:1", "node7.example.org", "node7", "10.1.2.3",
                           "fe80:0::1"}) {
    EXPECT_TRUE(local.is_local(host)) << host;
  }
}

TEST(LocalIdentity, OtherLoopbackAddressesAreOtherHosts) {
  LocalIdentity local("node7", {"127.0.0.1", "10.1.2.3"});
  for (const char* host : {"127.0.0.2", "127.0.0.3", "127.1.0.1", "10.1.2.4", "node8", "node7.other", "::2", "localhost2"}) {
    EXPECT_FALSE(local.is_local(host)) << host;
  }
}

TEST(LocalIdentity, ThisMachine) {
  char hostname[256] = {};
  ASSERT_EQ(gethostname(hostname, sizeof hostname - 1), 0);
  LocalIdentity local = LocalIdentity::of_this_machine();
  EXPECT_TRUE(local.is_local(hostname));
  EXPECT_TRUE(local.is_local("127.0.0.1"));
  EXPECT_FALSE(local.is_local("127.0.0.2"));
}

}  // namespace
}  // namespace edt::launcher
