#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "edt/store.h"

namespace edt {

TEST(MemoryStore, SetGetAddCompareSetErase) {
  MemoryStore store;
  ASSERT_TRUE(store.set("a", "1").is_ok());
  EXPECT_EQ(store.get("a").value(), "1");
  EXPECT_FALSE(store.try_get("b").value().has_value());
  EXPECT_EQ(store.add("n", 5).value(), 5);
  EXPECT_EQ(store.add("n", -2).value(), 3);
  EXPECT_EQ(store.add("a", 1).value(), 2);
  EXPECT_EQ(store.compare_set("c", "", "x").value(), "x");
  EXPECT_EQ(store.compare_set("c", "y", "z").value(), "x");
  EXPECT_EQ(store.compare_set("c", "x", "z").value(), "z");
  EXPECT_TRUE(store.erase("c").value());
  EXPECT_FALSE(store.erase("c").value());
}

TEST(MemoryStore, AddOnNonIntegerIsAnError) {
  MemoryStore store;
  ASSERT_TRUE(store.set("a", "abc").is_ok());
  auto r = store.add("a", 1);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

// Found by fuzz/store_codec (UBSan: signed overflow): a sum past int64 is
// refused and the counter keeps its value.
TEST(MemoryStore, AddThatWouldOverflowIsAnError) {
  MemoryStore store;
  ASSERT_TRUE(store.add("n", INT64_MAX - 1).is_ok());
  auto r = store.add("n", 2);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("overflow"), std::string::npos) << r.status().message();
  EXPECT_EQ(store.add("n", INT64_MIN).value(), -2);
}

TEST(MemoryStore, GetWaitsForAnotherThread) {
  MemoryStore store;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    (void)store.set("late", "v");
  });
  EXPECT_EQ(store.get("late", std::chrono::seconds(5)).value(), "v");
  setter.join();
}

TEST(MemoryStore, WaitTimesOutNamingTheKeys) {
  MemoryStore store;
  auto status = store.wait({"x", "y"}, std::chrono::milliseconds(10));
  EXPECT_EQ(status.code(), StatusCode::kTimeout);
  EXPECT_NE(status.message().find("x, y"), std::string::npos);
}

TEST(PrefixStore, ScopesKeys) {
  auto base = std::make_shared<MemoryStore>();
  PrefixStore gen1("gen1", base), gen2("gen2", base);
  ASSERT_TRUE(gen1.set("k", "one").is_ok());
  ASSERT_TRUE(gen2.set("k", "two").is_ok());
  EXPECT_EQ(gen1.get("k").value(), "one");
  EXPECT_EQ(base->get("gen2/k").value(), "two");
  EXPECT_TRUE(gen1.wait({"k"}, std::chrono::milliseconds(10)).is_ok());
}

}  // namespace edt
