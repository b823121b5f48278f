#include "elastic/membership.h"

#include <gtest/gtest.h>

#include <future>

namespace edt::elastic {
namespace {

using namespace std::chrono_literals;

// A job whose workers are threads sharing one MemoryStore; the test plays
// the launcher by driving the coordinator.
class MembershipTest : public ::testing::Test {
 protected:
  std::shared_ptr<Store> store_ = std::make_shared<MemoryStore>();

  std::unique_ptr<MembershipClient> client(const std::string& id, const std::string& host,
                                           Duration heartbeat = 1000ms) {
    return std::make_unique<MembershipClient>(
        store_, store_, MembershipClientOptions{.id = id, .host = host, .heartbeat_interval = heartbeat,
                                                .poll_interval = 20ms});
  }

  // Polls until the coordinator publishes a generation, or fails the test.
  Generation poll_until_published(MembershipCoordinator& c, Duration limit = 5000ms) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      auto out = c.poll();
      EXPECT_TRUE(out.is_ok()) << out.status().to_string();
      if (out.is_ok() && out->published) return *out->published;
      std::this_thread::sleep_for(5ms);
    }
    ADD_FAILURE() << "no generation published within " << limit.count() << " ms";
    return {};
  }

  static void wait_seen(const MembershipClient& c, int64_t g) {
    const auto deadline = Clock::now() + 2s;
    while (c.newest_seen() < g && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    ASSERT_EQ(c.newest_seen(), g);
  }

  static std::vector<std::string> ids(const Generation& g) {
    std::vector<std::string> out;
    for (const auto& m : g.members) out.push_back(m.id);
    return out;
  }
};

TEST_F(MembershipTest, FirstGenerationWaitsForEveryoneAndOrdersByHostThenSlot) {
  MembershipCoordinator coord(store_, {});
  coord.expect("b0", "hostB", 1, 0);
  coord.expect("a1", "hostA", 0, 1);
  coord.expect("a0", "hostA", 0, 0);
  auto a0 = client("a0", "hostA"), a1 = client("a1", "hostA"), b0 = client("b0", "hostB");
  ASSERT_TRUE(b0->start().is_ok());
  ASSERT_TRUE(a1->start().is_ok());
  auto early = coord.poll();
  ASSERT_TRUE(early.is_ok());
  EXPECT_FALSE(early->published);  // a0 is still starting
  ASSERT_TRUE(a0->start().is_ok());
  Generation g = poll_until_published(coord);
  EXPECT_EQ(g.number, 1);
  EXPECT_EQ(ids(g), (std::vector<std::string>{"a0", "a1", "b0"}));
  auto joined = b0->join(0, 1000ms);
  ASSERT_TRUE(joined.is_ok()) << joined.status().to_string();
  EXPECT_EQ(joined->rank_of("b0"), 2);
  EXPECT_EQ(joined->members[2].host, "hostB");
}

TEST_F(MembershipTest, HostsAddedTogetherMakeOneGenerationAndOldHostsKeepLowRanks) {
  MembershipCoordinator coord(store_, {});
  coord.expect("x0", "hostX", 5, 0);
  auto x0 = client("x0", "hostX");
  std::atomic<int> seen_hosts_updated{0};
  x0->on_new_generation([&](const Generation& g) {
    if (!g.failure) ++seen_hosts_updated;
  });
  ASSERT_TRUE(x0->start().is_ok());
  ASSERT_EQ(poll_until_published(coord).number, 1);
  wait_seen(*x0, 1);

  // Two hosts come; the newcomers' host order is higher, so they rank after.
  coord.expect("y0", "hostY", 6, 0);
  coord.expect("z0", "hostZ", 7, 0);
  auto y0 = client("y0", "hostY"), z0 = client("z0", "hostZ");
  ASSERT_TRUE(y0->start().is_ok());
  for (int i = 0; i < 5; ++i) {
    auto out = coord.poll();
    ASSERT_TRUE(out.is_ok());
    EXPECT_FALSE(out->published) << "published before z0 registered";
  }
  auto z_joined = std::async(std::launch::async, [&] { return z0->join(0, 5000ms); });
  ASSERT_TRUE(z0->start().is_ok());
  Generation g = poll_until_published(coord);
  EXPECT_EQ(g.number, 2);
  EXPECT_FALSE(g.failure);
  EXPECT_EQ(ids(g), (std::vector<std::string>{"x0", "y0", "z0"}));
  auto zj = z_joined.get();
  ASSERT_TRUE(zj.is_ok()) << zj.status().to_string();
  EXPECT_EQ(zj->number, 2);
  // The survivor learned of it in the background, without asking.
  wait_seen(*x0, 2);
  EXPECT_EQ(seen_hosts_updated.load(), 2);  // generations 1 and 2
}

TEST_F(MembershipTest, EveryMemberAgreesTheSourceIsTheMostRecentCommit) {
  MembershipCoordinator coord(store_, {});
  std::vector<std::unique_ptr<MembershipClient>> clients;
  for (int i = 0; i < 4; ++i) {
    const std::string id = "w" + std::to_string(i);
    coord.expect(id, "h", 0, i);
    clients.push_back(client(id, "h"));
    ASSERT_TRUE(clients.back()->start().is_ok());
  }
  Generation g = poll_until_published(coord);
  const int64_t commits[] = {5, 7, 0, 7};  // a newcomer has 0; ranks 1 and 3 tie at 7
  std::vector<std::future<Result<StateSource>>> results;
  for (int i = 0; i < 4; ++i)
    results.push_back(std::async(std::launch::async,
                                 [&, i] { return clients[i]->agree_on_source(g, commits[i], 5000ms); }));
  for (auto& r : results) {
    auto source = r.get();
    ASSERT_TRUE(source.is_ok()) << source.status().to_string();
    EXPECT_EQ(source->rank, 1);
    EXPECT_EQ(source->commit_id, 7);
  }
}

TEST_F(MembershipTest, AFailedWorkerMakesAFailureGenerationAtOnce) {
  MembershipCoordinator coord(store_, {});
  auto a = client("a", "h1"), b = client("b", "h2");
  coord.expect("a", "h1", 0, 0);
  coord.expect("b", "h2", 1, 0);
  std::promise<Generation> failure_seen;
  a->on_new_generation([&](const Generation& g) {
    if (g.failure) failure_seen.set_value(g);
  });
  ASSERT_TRUE(a->start().is_ok());
  ASSERT_TRUE(b->start().is_ok());
  ASSERT_EQ(poll_until_published(coord).number, 1);
  coord.lost("b", "exited with signal 9");
  Generation g = poll_until_published(coord, 100ms);
  EXPECT_TRUE(g.failure);
  EXPECT_NE(g.why.find("b: exited with signal 9"), std::string::npos) << g.why;
  EXPECT_EQ(ids(g), (std::vector<std::string>{"a"}));
  auto fut = failure_seen.get_future();
  ASSERT_EQ(fut.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(fut.get().number, 2);
}

TEST_F(MembershipTest, ABrokenGenerationIsReformedWithItsLiveMembers) {
  MembershipCoordinator coord(store_, {});
  auto a = client("a", "h"), b = client("b", "h");
  coord.expect("a", "h", 0, 0);
  coord.expect("b", "h", 0, 1);
  ASSERT_TRUE(a->start().is_ok());
  ASSERT_TRUE(b->start().is_ok());
  ASSERT_EQ(poll_until_published(coord).number, 1);
  a->report_broken(1, "allreduce: connection reset");
  b->report_broken(1, "allreduce: timeout");  // the first report wins
  Generation g = poll_until_published(coord, 100ms);
  EXPECT_TRUE(g.failure);
  EXPECT_EQ(g.why, "a: allreduce: connection reset");
  EXPECT_EQ(ids(g), (std::vector<std::string>{"a", "b"}));
}

TEST_F(MembershipTest, ARemovedWorkerIsToldItLeftAndTheOthersGoOn) {
  MembershipCoordinator coord(store_, {});
  auto a = client("a", "h1"), b = client("b", "h2");
  coord.expect("a", "h1", 0, 0);
  coord.expect("b", "h2", 1, 0);
  ASSERT_TRUE(a->start().is_ok());
  ASSERT_TRUE(b->start().is_ok());
  ASSERT_EQ(poll_until_published(coord).number, 1);
  coord.remove("b", "host h2 was removed from the host list");
  Generation g = poll_until_published(coord, 100ms);
  EXPECT_FALSE(g.failure);
  EXPECT_EQ(ids(g), (std::vector<std::string>{"a"}));
  auto left = b->join(1, 1000ms);
  EXPECT_EQ(left.status().code(), StatusCode::kAborted);
  EXPECT_NE(left.status().message().find("host h2 was removed"), std::string::npos);
  EXPECT_EQ(a->join(1, 1000ms)->number, 2);
}

TEST_F(MembershipTest, ASilentWorkerIsLostAfterTheHeartbeatTimeout) {
  MembershipCoordinator coord(store_, {.heartbeat_timeout = 300ms});
  auto a = client("a", "h1", 50ms), b = client("b", "h2", 50ms);
  coord.expect("a", "h1", 0, 0);
  coord.expect("b", "h2", 1, 0);
  ASSERT_TRUE(a->start().is_ok());
  ASSERT_TRUE(b->start().is_ok());
  ASSERT_EQ(poll_until_published(coord).number, 1);
  const auto silenced = Clock::now();
  b.reset();  // its heartbeats stop; nobody tells the coordinator
  std::vector<std::string> silent;
  Generation g;
  while (Clock::now() - silenced < 3s) {
    auto out = coord.poll();
    ASSERT_TRUE(out.is_ok());
    silent.insert(silent.end(), out->silent.begin(), out->silent.end());
    if (out->published) {
      g = *out->published;
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  const auto took = Clock::now() - silenced;
  EXPECT_EQ(silent, (std::vector<std::string>{"b"}));
  EXPECT_TRUE(g.failure);
  EXPECT_EQ(ids(g), (std::vector<std::string>{"a"}));
  EXPECT_GE(took, 250ms);  // a live worker beating every 50 ms was never taken for silent
}

TEST_F(MembershipTest, NoGenerationBelowTheMinimum) {
  MembershipCoordinator coord(store_, {.min_size = 2});
  auto a = client("a", "h");
  coord.expect("a", "h", 0, 0);
  ASSERT_TRUE(a->start().is_ok());
  auto out = coord.poll();
  ASSERT_TRUE(out.is_ok());
  EXPECT_TRUE(out->below_min);
  EXPECT_EQ(out->ready, 1);
  EXPECT_FALSE(out->published);
  coord.expect("b", "h", 0, 1);
  auto b = client("b", "h");
  ASSERT_TRUE(b->start().is_ok());
  EXPECT_EQ(ids(poll_until_published(coord)), (std::vector<std::string>{"a", "b"}));
}

TEST_F(MembershipTest, AMemberLeavingWhileItsReplacementStartsIsNotBelowTheMinimum) {
  MembershipCoordinator coord(store_, {.min_size = 2});
  auto a = client("a", "h"), b = client("b", "h");
  coord.expect("a", "h", 0, 0);
  coord.expect("b", "h", 0, 1);
  ASSERT_TRUE(a->start().is_ok());
  ASSERT_TRUE(b->start().is_ok());
  EXPECT_EQ(ids(poll_until_published(coord)), (std::vector<std::string>{"a", "b"}));
  coord.expect("c", "h2", 1, 0);
  coord.remove("b", "its host left");
  auto out = coord.poll();
  ASSERT_TRUE(out.is_ok());
  EXPECT_FALSE(out->below_min);  // c is starting: waited for, not a shortage
  EXPECT_FALSE(out->published);
  coord.remove("c", "its host left too");
  out = coord.poll();
  ASSERT_TRUE(out.is_ok());
  EXPECT_TRUE(out->below_min);
  coord.expect("d", "h2", 1, 0);
  auto d = client("d", "h2");
  ASSERT_TRUE(d->start().is_ok());
  EXPECT_EQ(ids(poll_until_published(coord)), (std::vector<std::string>{"a", "d"}));
}

TEST_F(MembershipTest, NoMoreMembersThanTheMaximum) {
  MembershipCoordinator coord(store_, {.max_size = 2});
  std::vector<std::unique_ptr<MembershipClient>> clients;
  for (int i = 0; i < 3; ++i) {
    coord.expect("w" + std::to_string(i), "h", 0, i);
    clients.push_back(client("w" + std::to_string(i), "h"));
    ASSERT_TRUE(clients.back()->start().is_ok());
  }
  EXPECT_EQ(ids(poll_until_published(coord)), (std::vector<std::string>{"w0", "w1"}));
}

TEST_F(MembershipTest, AGenerationReplacedWhileFormingSendsMembersToTheNextOne) {
  MembershipCoordinator coord(store_, {});
  auto a = client("a", "h"), b = client("b", "h");
  coord.expect("a", "h", 0, 0);
  coord.expect("b", "h", 0, 1);
  ASSERT_TRUE(a->start().is_ok());
  ASSERT_TRUE(b->start().is_ok());
  Generation g1 = poll_until_published(coord);
  auto agreeing = std::async(std::launch::async, [&] { return a->agree_on_source(g1, 3, 5000ms); });
  std::this_thread::sleep_for(50ms);
  coord.lost("b", "exited with code 1");  // b dies before it arrives
  poll_until_published(coord);
  auto replaced = agreeing.get();
  EXPECT_EQ(replaced.status().code(), StatusCode::kHostsUpdated) << replaced.status().to_string();
  auto g2 = a->join(g1.number, 1000ms);
  ASSERT_TRUE(g2.is_ok());
  auto source = a->agree_on_source(g2.value(), 3, 1000ms);
  ASSERT_TRUE(source.is_ok());
  EXPECT_EQ(source->commit_id, 3);
}

TEST_F(MembershipTest, ShutdownEndsWaitsWithItsReason) {
  MembershipCoordinator coord(store_, {.min_size = 2});
  auto a = client("a", "h");
  coord.expect("a", "h", 0, 0);
  ASSERT_TRUE(a->start().is_ok());
  auto waiting = std::async(std::launch::async, [&] { return a->join(0, 10000ms); });
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(coord.shutdown("had 1 slot, needed 2 (--min-np) for 600 s").is_ok());
  auto r = waiting.get();
  EXPECT_EQ(r.status().code(), StatusCode::kAborted);
  EXPECT_NE(r.status().message().find("needed 2"), std::string::npos);
}

TEST_F(MembershipTest, JoinTimesOutNamingTheWorker) {
  auto a = client("a", "h");
  ASSERT_TRUE(a->start().is_ok());
  auto r = a->join(0, 100ms);
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_NE(r.status().message().find("worker a"), std::string::npos);
}

TEST_F(MembershipTest, RejectsBadWorkerIds) {
  EXPECT_EQ(client("has space", "h")->start().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client("", "h")->start().code(), StatusCode::kInvalidArgument);
}

TEST(GenerationCodec, RoundTrips) {
  Generation g{7, true, "w3: exited with signal 9", {{"w0", "10.0.0.1"}, {"w1", "host b"}}};
  auto back = Generation::decode(7, g.encode());
  ASSERT_TRUE(back.is_ok());
  EXPECT_TRUE(back->failure);
  EXPECT_EQ(back->why, g.why);
  EXPECT_EQ(back->members, g.members);
  EXPECT_FALSE(Generation::decode(1, "bogus\nw0 h").is_ok());
}

// Any process that reaches the store can write a generation: one that names
// a member twice, or a member without an id or a host, is refused (two
// workers would take one rank).
TEST(GenerationCodec, RefusesARepeatedOrEmptyMember) {
  EXPECT_TRUE(Generation::decode(2, "hosts-updated\nw0 a\nw1 a").is_ok());
  EXPECT_FALSE(Generation::decode(2, "hosts-updated\nw0 a\nw0 b").is_ok());
  EXPECT_FALSE(Generation::decode(2, "hosts-updated\n a").is_ok());
  EXPECT_FALSE(Generation::decode(2, "hosts-updated\nw0 ").is_ok());
}

TEST(GenerationCodec, AMultiLineReasonStaysOnTheKindLine) {
  Generation g{3, true, "w2: allreduce failed:\npeer 1 closed the connection\n", {{"w0", "a"}, {"w1", "b"}}};
  auto back = Generation::decode(3, g.encode());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->why, "w2: allreduce failed: peer 1 closed the connection ");
  EXPECT_EQ(back->members, g.members);
}

}  // namespace
}  // namespace edt::elastic
