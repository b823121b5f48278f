#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "edt/tcp_store.h"
#include "rendezvous/tcp_store_protocol.h"

namespace edt {
namespace {

using std::chrono::milliseconds;

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = TcpStoreServer::start({.host = "127.0.0.1", .port = 0});
    ASSERT_TRUE(server.is_ok()) << server.status().to_string();
    server_ = std::move(server).value();
  }
  std::shared_ptr<Store> client() {
    auto c = connect_tcp_store("127.0.0.1:" + std::to_string(server_->port()), milliseconds(5000));
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return c.is_ok() ? *c : nullptr;
  }
  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(TcpStoreTest, EveryOperation) {
  auto store = client();
  ASSERT_TRUE(store->set("a", "1").is_ok());
  EXPECT_EQ(store->get("a").value(), "1");
  EXPECT_EQ(store->try_get("a").value(), std::optional<std::string>("1"));
  EXPECT_FALSE(store->try_get("b").value().has_value());
  EXPECT_EQ(store->add("n", 5).value(), 5);
  EXPECT_EQ(store->add("n", -7).value(), -2);
  EXPECT_EQ(store->compare_set("c", "", "x").value(), "x");
  EXPECT_EQ(store->compare_set("c", "y", "z").value(), "x");
  EXPECT_EQ(store->compare_set("c", "x", "z").value(), "z");
  EXPECT_TRUE(store->wait({"a", "c"}, milliseconds(100)).is_ok());
  EXPECT_TRUE(store->erase("c").value());
  EXPECT_FALSE(store->erase("c").value());
  // Binary values and empty values survive the trip.
  std::string binary("\0\x01\xff zero", 8);
  ASSERT_TRUE(store->set("bin", binary).is_ok());
  EXPECT_EQ(store->get("bin").value(), binary);
  ASSERT_TRUE(store->set("empty", "").is_ok());
  EXPECT_EQ(store->try_get("empty").value(), std::optional<std::string>(""));
}

TEST_F(TcpStoreTest, AddOnTextIsAnErrorAndTheConnectionStaysUsable) {
  auto store = client();
  ASSERT_TRUE(store->set("a", "text").is_ok());
  auto r = store->add("a", 1);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'a'"), std::string::npos);
  EXPECT_EQ(store->get("a").value(), "text");
}

TEST_F(TcpStoreTest, GetWaitsForAnotherClient) {
  auto waiter = client();
  auto setter = client();
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(setter->set("late", "v").is_ok());
  });
  EXPECT_EQ(waiter->get("late", milliseconds(5000)).value(), "v");
  t.join();
}

TEST_F(TcpStoreTest, WaitTimesOutNamingTheKeys) {
  auto store = client();
  auto start = std::chrono::steady_clock::now();
  Status s = store->wait({"x", "y"}, milliseconds(100));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
  EXPECT_NE(s.message().find("x, y"), std::string::npos);
  EXPECT_GE(took, milliseconds(100));
  EXPECT_LT(took, milliseconds(3000));
  auto g = store->get("x", milliseconds(20));
  EXPECT_EQ(g.status().code(), StatusCode::kTimeout);
  // Still usable after timeouts.
  EXPECT_TRUE(store->set("x", "1").is_ok());
  EXPECT_EQ(store->get("x", milliseconds(20)).value(), "1");
}

TEST_F(TcpStoreTest, ABlockedClientDoesNotDelayOthers) {
  auto blocked = client();
  auto other = client();
  std::thread t([&] { EXPECT_EQ(blocked->get("never", milliseconds(2000)).status().code(), StatusCode::kTimeout); });
  std::this_thread::sleep_for(milliseconds(50));
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(other->set("k" + std::to_string(i), "v").is_ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1500));
  t.join();
}

TEST_F(TcpStoreTest, LocalStoreChangesWakeRemoteWaiters) {
  auto remote = client();
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(server_->local_store()->set("from-driver", "hi").is_ok());
  });
  EXPECT_EQ(remote->get("from-driver", milliseconds(5000)).value(), "hi");
  t.join();
  ASSERT_TRUE(remote->set("from-worker", "yo").is_ok());
  EXPECT_EQ(server_->local_store()->get("from-worker", milliseconds(100)).value(), "yo");
}

TEST_F(TcpStoreTest, ManyConcurrentClientsCountAtomically) {
  constexpr int kClients = 32, kAdds = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto store = client();
      if (!store) return void(++failures);
      for (int i = 0; i < kAdds; ++i)
        if (!store->add("counter", 1).is_ok()) ++failures;
      if (!store->set("done/" + std::to_string(c), "1").is_ok()) ++failures;
      // Every client waits for every other: a barrier through the store.
      std::vector<std::string> all;
      for (int o = 0; o < kClients; ++o) all.push_back("done/" + std::to_string(o));
      if (!store->wait(all, milliseconds(10000)).is_ok()) ++failures;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(client()->add("counter", 0).value(), kClients * kAdds);
}

TEST_F(TcpStoreTest, OneClientSharedByThreads) {
  auto store = client();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) EXPECT_TRUE(store->add("shared", 1).is_ok());
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(store->add("shared", 0).value(), 800);
}

TEST_F(TcpStoreTest, PrefixStoreOverTcp) {
  auto base = client();
  PrefixStore gen("gen3", base);
  ASSERT_TRUE(gen.set("addr/0", "x").is_ok());
  EXPECT_EQ(base->get("gen3/addr/0").value(), "x");
  EXPECT_TRUE(gen.wait({"addr/0"}, milliseconds(100)).is_ok());
}

TEST_F(TcpStoreTest, ServerGoneIsUnavailableNamingTheAddress) {
  auto store = client();
  ASSERT_TRUE(store->set("a", "1").is_ok());
  const std::string address = "127.0.0.1:" + std::to_string(server_->port());
  server_.reset();
  for (int i = 0; i < 3; ++i) {
    Status s = store->set("a", "2");
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
    EXPECT_NE(s.message().find(address), std::string::npos) << s.message();
  }
  EXPECT_EQ(store->get("a", milliseconds(100)).status().code(), StatusCode::kUnavailable);
}

TEST_F(TcpStoreTest, ServerGoneWakesAParkedWaiter) {
  auto store = client();
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(100));
    server_.reset();
  });
  auto start = std::chrono::steady_clock::now();
  auto r = store->get("never", milliseconds(20000));
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
  t.join();
}

TEST(TcpStoreConnect, NobodyListeningTimesOut) {
  // Bind a port, then close it, so nothing listens there.
  auto server = TcpStoreServer::start({.host = "127.0.0.1", .port = 0});
  ASSERT_TRUE(server.is_ok());
  uint16_t port = (*server)->port();
  server->reset();
  auto start = std::chrono::steady_clock::now();
  auto c = connect_tcp_store("127.0.0.1", port, milliseconds(300));
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3000));
}

TEST(TcpStoreConnect, ClientWaitsForALateServer) {
  auto probe = TcpStoreServer::start({.host = "127.0.0.1", .port = 0});
  ASSERT_TRUE(probe.is_ok());
  uint16_t port = (*probe)->port();
  probe->reset();
  std::unique_ptr<TcpStoreServer> late;
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(200));
    auto s = TcpStoreServer::start({.host = "127.0.0.1", .port = port});
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    late = std::move(s).value();
  });
  auto c = connect_tcp_store("127.0.0.1", port, milliseconds(5000));
  t.join();
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_TRUE((*c)->set("k", "v").is_ok());
}

TEST(TcpStoreConnect, MalformedAddresses) {
  for (const char* bad : {"nohost", "host:", "host:0", "host:70000", "[::1]5", "host:12x"}) {
    auto c = connect_tcp_store(std::string(bad), milliseconds(10));
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

// The codec reads whatever a peer sent (fuzz/store_codec runs it on
// mutated frames); these are what it must refuse.
TEST(TcpStoreProtocol, RequestsOnlyAsAPeerOfThisVersionSendsThem) {
  using rendezvous::FrameWriter;
  using rendezvous::Op;
  auto body = [](FrameWriter& w) { return w.take().substr(4); };
  FrameWriter set;
  auto q = rendezvous::decode_request(body(set.u8(uint8_t(Op::kSet)).str("k").str("v")));
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  EXPECT_EQ(q->keys, std::vector<std::string>{"k"});
  EXPECT_EQ(q->value, "v");
  FrameWriter trailing, unknown, two_keys, no_keys, short_string;
  const std::string refused[] = {
      body(trailing.u8(uint8_t(Op::kSet)).str("k").str("v").u8(0)),
      body(unknown.u8(8).str("k")),
      body(two_keys.u8(uint8_t(Op::kGet)).i64(5).str("a").str("b")),
      body(no_keys.u8(uint8_t(Op::kWait)).i64(5)),
      body(short_string.u8(uint8_t(Op::kErase)).str("key")).substr(0, 6),
      "",
  };
  for (const auto& bytes : refused) {
    auto r = rendezvous::decode_request(bytes);
    ASSERT_FALSE(r.is_ok()) << bytes.size();
    EXPECT_NE(r.status().message().find("malformed TCP store request"), std::string::npos);
  }
}

TEST(TcpStoreProtocol, RepliesWithAKnownCodeOnly) {
  auto reply = [](uint8_t code, uint8_t present) {
    return rendezvous::decode_reply(rendezvous::FrameWriter().u8(code).u8(present).str("x").take().substr(4));
  };
  EXPECT_EQ(reply(uint8_t(StatusCode::kTimeout), 1)->code, StatusCode::kTimeout);
  EXPECT_FALSE(reply(uint8_t(StatusCode::kInternal) + 1, 1).is_ok());
  EXPECT_FALSE(reply(0, 2).is_ok());
}

// A wait's timeout is any i64 a peer sent; now plus INT64_MAX ms overflowed
// the clock (UBSan), and the wrapped deadline could lie in the past.
TEST(TcpStoreProtocol, AWaitDeadlineIsNeverBeforeNowNorPastAYear) {
  const auto now = std::chrono::steady_clock::now();
  const auto year = std::chrono::hours(24 * 365);
  EXPECT_EQ(rendezvous::wait_deadline(now, INT64_MAX), now + year);
  EXPECT_EQ(rendezvous::wait_deadline(now, INT64_MIN), now);
  EXPECT_EQ(rendezvous::wait_deadline(now, 250), now + milliseconds(250));
}

}  // namespace
}  // namespace edt
