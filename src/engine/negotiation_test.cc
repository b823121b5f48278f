#include "engine/negotiation.h"

#include <gtest/gtest.h>

namespace edt::engine {
namespace {

Meta meta(std::vector<int64_t> shape) {
  Meta m;
  m.shape = std::move(shape);
  return m;
}

// Feeds one cycle of messages (one per rank) to every rank's negotiator and
// checks that they all decide the same; returns rank 0's outcome.
CycleOutcome cycle(std::vector<Negotiator>& ns, const std::vector<std::vector<Announcement>>& per_rank) {
  std::vector<std::string> messages;
  for (size_t r = 0; r < ns.size(); ++r) messages.push_back(ns[r].encode(per_rank[r], false, false));
  std::vector<std::string_view> views(messages.begin(), messages.end());
  std::vector<CycleOutcome> outcomes;
  for (auto& n : ns) {
    auto o = n.decode(views);
    EXPECT_TRUE(o.is_ok()) << o.status().to_string();
    outcomes.push_back(std::move(o).value());
  }
  for (auto& o : outcomes) {
    EXPECT_EQ(o.ready.size(), outcomes[0].ready.size());
    for (size_t i = 0; i < o.ready.size() && i < outcomes[0].ready.size(); ++i) {
      EXPECT_EQ(o.ready[i].name, outcomes[0].ready[i].name);
    }
  }
  return outcomes[0];
}

TEST(NegotiatorTest, ReadyOnceEveryRankAnnouncedInTheSameOrderEverywhere) {
  std::vector<Negotiator> ns(2, Negotiator(2, 16));
  auto o = cycle(ns, {{{"a", meta({1})}, {"b", meta({2})}}, {{"b", meta({2})}}});
  ASSERT_EQ(o.ready.size(), 1u);
  EXPECT_EQ(o.ready[0].name, "b");
  EXPECT_TRUE(o.anything_pending);
  EXPECT_EQ(ns[0].missing_ranks("a"), std::vector<int>{1});
  for (const Negotiator& n : ns) {  // every rank sees who is awaited
    EXPECT_FALSE(n.waits_for(0));
    EXPECT_TRUE(n.waits_for(1));
  }
  o = cycle(ns, {{}, {{"a", meta({1})}}});
  ASSERT_EQ(o.ready.size(), 1u);
  EXPECT_EQ(o.ready[0].name, "a");
  EXPECT_FALSE(o.anything_pending);
  EXPECT_FALSE(ns[0].waits_for(1));
}

TEST(NegotiatorTest, CachedNamesAreAnnouncedInFewBytes) {
  std::vector<Negotiator> ns(2, Negotiator(2, 16));
  std::vector<Announcement> mine = {{"layer1.weight.grad", meta({256, 128})}};
  std::string first = ns[0].encode(mine, false, false);
  cycle(ns, {mine, mine});
  EXPECT_EQ(ns[0].cache_size(), 1u);
  std::string again = ns[0].encode(mine, false, false);
  EXPECT_LT(again.size(), first.size());
  EXPECT_EQ(again.size(), 10u);  // flags, count, kind, id
  auto o = cycle(ns, {mine, mine});
  ASSERT_EQ(o.ready.size(), 1u);
  EXPECT_EQ(o.ready[0].name, "layer1.weight.grad");
  EXPECT_EQ(o.ready[0].first().shape, (std::vector<int64_t>{256, 128}));
  // A new shape under a cached name is announced in full, and still checked.
  auto o2 = cycle(ns, {{{"layer1.weight.grad", meta({4})}}, mine});
  ASSERT_EQ(o2.ready.size(), 1u);
  EXPECT_NE(o2.ready[0].error.find("Mismatched allreduce tensor shapes"), std::string::npos);
}

TEST(NegotiatorTest, CacheCapacityBoundsTheCache) {
  std::vector<Negotiator> ns(1, Negotiator(1, 2));
  for (int i = 0; i < 5; ++i) cycle(ns, {{{"n" + std::to_string(i), meta({1})}}});
  EXPECT_EQ(ns[0].cache_size(), 2u);
}

TEST(NegotiatorTest, GarbageIsAnInternalError) {
  Negotiator n(1, 4);
  std::string junk("\x00\x05\x00\x00\x00\x07", 6);
  auto o = n.decode({std::string_view(junk)});
  ASSERT_FALSE(o.is_ok());
  EXPECT_EQ(o.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace edt::engine
