#include "rendezvous/peer_exchange.h"

#include <gtest/gtest.h>

#include <thread>

namespace edt::rendezvous {
namespace {

PeerExchange entry(int rank, int size, std::chrono::milliseconds timeout) {
  return {rank, size, "blob of " + std::to_string(rank), std::chrono::steady_clock::now() + timeout, timeout,
          [](const std::string& blob) { return "'" + blob + "'"; }};
}

TEST(PeerExchangeTest, EveryRankGetsEveryBlobInRankOrder) {
  MemoryStore store;
  constexpr int kSize = 4;
  std::vector<Result<std::vector<std::string>>> got(kSize, Status::ok());
  std::vector<std::thread> ranks;
  for (int r = 0; r < kSize; ++r)
    ranks.emplace_back([&, r] { got[r] = exchange_blobs(store, entry(r, kSize, std::chrono::seconds(10))); });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kSize; ++r) {
    ASSERT_TRUE(got[r].is_ok()) << got[r].status().to_string();
    EXPECT_EQ(*got[r], (std::vector<std::string>{"blob of 0", "blob of 1", "blob of 2", "blob of 3"}));
  }
}

// `got` failed with `code`, its message naming `text`.
template <typename T>
void expect_refused(const Result<T>& got, StatusCode code, const std::string& text) {
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().code(), code);
  EXPECT_NE(got.status().message().find(text), std::string::npos) << got.status().message();
}

TEST(PeerExchangeTest, ATakenRankNamesItsHolder) {
  MemoryStore store;
  ASSERT_TRUE(store.set("rank/1", "someone else").is_ok());
  expect_refused(exchange_blobs(store, entry(1, 2, std::chrono::seconds(1))), StatusCode::kAlreadyExists,
                 "'someone else'");
}

TEST(PeerExchangeTest, AMissingRankIsATimeoutThatNamesIt) {
  MemoryStore store;
  ASSERT_TRUE(store.set("rank/0", "blob of 0").is_ok());
  expect_refused(exchange_blobs(store, entry(2, 4, std::chrono::milliseconds(50))), StatusCode::kTimeout,
                 "missing rank(s) 1, 3");
}

}  // namespace
}  // namespace edt::rendezvous
