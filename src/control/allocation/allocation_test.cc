#include "control/allocation/allocation.h"

#include <gtest/gtest.h>

namespace edt::control {
namespace {

TEST(AddressRange, ParsesAndRefuses) {
  auto r = AddressRange::parse("127.77.0.0/16");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->size, 65536u);
  EXPECT_EQ(r->address(2), "127.77.0.2");
  EXPECT_EQ(r->cidr(), "127.77.0.0/16");
  EXPECT_EQ(AddressRange::parse("127.77.3.9/24")->cidr(), "127.77.3.0/24");
  EXPECT_FALSE(AddressRange::parse("10.0.0.0/8").is_ok());
  EXPECT_FALSE(AddressRange::parse("127.0.0.0/16").is_ok());  // holds 127.0.0.1
  EXPECT_FALSE(AddressRange::parse("127.77.0.0").is_ok());
  EXPECT_FALSE(AddressRange::parse("127.77.0.0/31").is_ok());
  EXPECT_FALSE(AddressRange::parse("127.77.0.0/2x").is_ok());
}

TEST(AddressRange, ABridgesRangeIsOutsideLoopbackAndKeepsItsGateway) {
  auto r = AddressRange::parse("198.19.4.0/24", NetworkMode::kBridge);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->gateway(), "198.19.4.1");
  EXPECT_EQ(r->prefix(), 24);
  auto picked = pick_addresses(*r, {}, 2);
  ASSERT_TRUE(picked.is_ok());
  EXPECT_EQ(*picked, (std::vector<std::string>{"198.19.4.2", "198.19.4.3"}));  // never the gateway
  EXPECT_TRUE(pick_addresses(*r, {}, 253).is_ok());
  EXPECT_FALSE(pick_addresses(*r, {}, 254).is_ok());
  for (const char* bad : {"127.77.0.0/16", "224.1.0.0/16", "0.1.0.0/16", "169.254.0.0/16", "198.19.0.0/30"}) {
    auto refused = AddressRange::parse(bad, NetworkMode::kBridge);
    ASSERT_FALSE(refused.is_ok()) << bad;
    EXPECT_NE(refused.status().message().find("198.19.0.0/16"), std::string::npos) << refused.status().message();
  }
  EXPECT_FALSE(AddressRange::parse("198.19.0.0/16").is_ok());  // loopback mode: inside 127/8 only
}

TEST(PickAddresses, LowestFreeFirstSkippingTheBlocksEnds) {
  const AddressRange range = AddressRange::parse("127.90.0.0/29").value();  // .1 to .6 usable
  auto picked = pick_addresses(range, {"127.90.0.1", "127.90.0.3"}, 3);
  ASSERT_TRUE(picked.is_ok());
  EXPECT_EQ(*picked, (std::vector<std::string>{"127.90.0.2", "127.90.0.4", "127.90.0.5"}));
  EXPECT_TRUE(pick_addresses(range, {}, 6).is_ok());
  auto full = pick_addresses(range, {}, 7);
  ASSERT_FALSE(full.is_ok());
  EXPECT_EQ(full.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(full.status().field(), "containers");
  EXPECT_EQ(full.status().message(), "no free address is left in 127.90.0.0/29");
  EXPECT_TRUE(pick_addresses(range, {}, 0)->empty());
}

TEST(PickGpus, WholeDevicesOfTheModelLowestFreeFirst) {
  std::vector<Gpu> inventory = {{0, "P4", true, "x-launcher"}, {1, "P4", true, ""}, {2, "T4", true, ""},
                                {3, "P4", true, ""},           {4, "P4", true, ""}, {5, "P4", true, ""}};
  auto picked = pick_gpus(inventory, "P4", 2, 2);
  ASSERT_TRUE(picked.is_ok());
  EXPECT_EQ(*picked, (std::vector<std::vector<int>>{{1, 3}, {4, 5}}));
  auto none = pick_gpus(inventory, "", 0, 3);
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(*none, (std::vector<std::vector<int>>(3)));
  auto short_of = pick_gpus(inventory, "P4", 3, 2);
  ASSERT_FALSE(short_of.is_ok());
  EXPECT_EQ(short_of.status().field(), "gpu.count");
  EXPECT_FALSE(pick_gpus(inventory, "H100", 1, 1).is_ok());
}

}  // namespace
}  // namespace edt::control
