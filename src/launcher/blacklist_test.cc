#include "launcher/blacklist.h"

#include <gtest/gtest.h>

namespace edt::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A clock the test moves by hand.
struct FakeClock {
  Blacklist::Clock::time_point now{};
  Blacklist::Now function() {
    return [this] { return now; };
  }
};

TEST(Blacklist, WithoutACooldownAHostIsOutForGood) {
  FakeClock clock;
  Blacklist blacklist(std::nullopt, clock.function());
  EXPECT_FALSE(blacklist.contains("a"));
  EXPECT_EQ(blacklist.add("a"), std::nullopt);
  clock.now += std::chrono::hours(1000);
  EXPECT_TRUE(blacklist.contains("a"));
  EXPECT_TRUE(blacklist.out_for_good("a"));
  EXPECT_FALSE(blacklist.contains("b"));
  EXPECT_FALSE(blacklist.out_for_good("b"));
}

TEST(Blacklist, AHostComesBackWhenItsCooldownPasses) {
  FakeClock clock;
  Blacklist blacklist(Blacklist::CooldownRange{seconds(10), seconds(100)}, clock.function());
  EXPECT_EQ(blacklist.add("a"), milliseconds(10000));
  EXPECT_FALSE(blacklist.out_for_good("a"));
  clock.now += milliseconds(9999);
  EXPECT_TRUE(blacklist.contains("a"));
  clock.now += milliseconds(1);
  EXPECT_FALSE(blacklist.contains("a"));
  EXPECT_FALSE(blacklist.contains("a"));  // and stays back
}

TEST(Blacklist, CooldownDoublesWithEveryFailureUpToTheMaximum) {
  FakeClock clock;
  Blacklist blacklist(Blacklist::CooldownRange{seconds(10), seconds(35)}, clock.function());
  EXPECT_EQ(blacklist.add("a"), seconds(10));
  clock.now += seconds(10);
  EXPECT_FALSE(blacklist.contains("a"));
  EXPECT_EQ(blacklist.add("a"), seconds(20));  // the count survived its return
  EXPECT_EQ(blacklist.add("a"), seconds(35));  // 40, capped
  EXPECT_EQ(blacklist.add("b"), seconds(10));  // counted per host
  for (int i = 0; i < 40; ++i) blacklist.add("a");  // no overflow past 2^20
  EXPECT_EQ(blacklist.add("a"), seconds(35));
  clock.now += seconds(34);
  EXPECT_TRUE(blacklist.contains("a"));
  clock.now += seconds(1);
  EXPECT_FALSE(blacklist.contains("a"));
}

}  // namespace
}  // namespace edt::launcher
