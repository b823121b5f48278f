#include "launcher/host_table.h"

#include <gtest/gtest.h>

#include <deque>

namespace edt::launcher {
namespace {

using std::chrono::milliseconds;

// Returns the queued answers in turn (the last one again once they run out).
class ScriptedSource final : public HostSource {
 public:
  ScriptedSource(std::deque<Result<std::vector<HostSlots>>> answers, milliseconds interval, int* polls)
      : answers_(std::move(answers)), interval_(interval), polls_(polls) {}
  Result<std::vector<HostSlots>> poll() override {
    ++*polls_;
    auto answer = answers_.front();
    if (answers_.size() > 1) answers_.pop_front();
    return answer;
  }
  milliseconds interval() const override { return interval_; }

 private:
  std::deque<Result<std::vector<HostSlots>>> answers_;
  milliseconds interval_;
  int* polls_;
};

HostTable table(std::deque<Result<std::vector<HostSlots>>> answers, int* polls,
                milliseconds interval = milliseconds(0)) {
  return HostTable(std::make_unique<ScriptedSource>(std::move(answers), interval, polls));
}

TEST(HostTable, OlderHostsKeepTheirPlaceWhenTheListIsReordered) {
  int polls = 0;
  HostTable hosts = table({std::vector<HostSlots>{{"a", 2}, {"b", 1}},
                           std::vector<HostSlots>{{"c", 1}, {"b", 1}, {"a", 2}}},
                          &polls);
  ASSERT_TRUE(hosts.read_first().is_ok());
  hosts.refresh(false);
  EXPECT_EQ(polls, 2);
  EXPECT_EQ(hosts.hosts(), (std::vector<HostSlots>{{"c", 1}, {"b", 1}, {"a", 2}}));
  EXPECT_EQ(hosts.order("a"), 0);
  EXPECT_EQ(hosts.order("c"), 2);
  Blacklist none(std::nullopt);
  EXPECT_EQ(hosts.wanted(none, 100), (std::vector<Slot>{{"a", 0}, {"a", 1}, {"b", 0}, {"c", 0}}));
  EXPECT_EQ(hosts.wanted(none, 3), (std::vector<Slot>{{"a", 0}, {"a", 1}, {"b", 0}}));
  EXPECT_EQ(hosts.usable_slots(none, 100), 4);
  EXPECT_EQ(hosts.usable_slots(none, 3), 3);
}

TEST(HostTable, BlacklistedHostsAreSkipped) {
  int polls = 0;
  HostTable hosts = table({std::vector<HostSlots>{{"a", 2}, {"b", 1}}}, &polls);
  ASSERT_TRUE(hosts.read_first().is_ok());
  Blacklist blacklist(std::nullopt);
  blacklist.add("a");
  EXPECT_EQ(hosts.wanted(blacklist, 100), (std::vector<Slot>{{"b", 0}}));
  EXPECT_EQ(hosts.usable_slots(blacklist, 100), 1);
  EXPECT_TRUE(hosts.any_hope(blacklist));
  blacklist.add("b");
  EXPECT_FALSE(hosts.any_hope(blacklist));
  Blacklist cooling(Blacklist::CooldownRange{milliseconds(1000), milliseconds(1000)});
  cooling.add("a");
  cooling.add("b");
  EXPECT_TRUE(hosts.any_hope(cooling));  // they come back
  EXPECT_EQ(hosts.usable_slots(cooling, 100), 0);
}

TEST(HostTable, ReadsAgainOnlyWhenDueOrChanged) {
  int polls = 0;
  HostTable hosts = table({std::vector<HostSlots>{{"a", 1}}, std::vector<HostSlots>{{"a", 1}, {"b", 1}}}, &polls,
                          std::chrono::hours(1));
  ASSERT_TRUE(hosts.read_first().is_ok());
  hosts.refresh(false);
  EXPECT_EQ(polls, 1);
  hosts.refresh(true);
  EXPECT_EQ(polls, 2);
  EXPECT_EQ(hosts.hosts().size(), 2u);
}

TEST(HostTable, AFailedReadKeepsThePreviousList) {
  int polls = 0;
  HostTable hosts = table({std::vector<HostSlots>{{"a", 1}}, unavailable("script failed")}, &polls);
  ASSERT_TRUE(hosts.read_first().is_ok());
  hosts.refresh(false);
  EXPECT_EQ(polls, 2);
  EXPECT_EQ(hosts.hosts(), (std::vector<HostSlots>{{"a", 1}}));
  int first_polls = 0;
  HostTable failing = table({unavailable("script failed")}, &first_polls);
  EXPECT_FALSE(failing.read_first().is_ok());
}

}  // namespace
}  // namespace edt::launcher
