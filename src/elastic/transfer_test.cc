// Sliced state transfer: slices, bytes per holder, and a holder or a
// receiver SIGKILLed in the middle (a forked process), after which the
// others are where they were and a second try succeeds.
#include "elastic/transfer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <thread>

namespace edt::elastic {
namespace {

using namespace std::chrono_literals;

constexpr size_t kState = 64 << 20;

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + i / 1000);
  return s;
}

// Slows every pump round down, so that a kill lands mid-transfer.
TransferControl slow() {
  return {5000ms, [] {
            std::this_thread::sleep_for(5ms);
            return false;
          }};
}

TEST(SliceOf, CoversTheWholeStateInDisjointNearlyEqualSlices) {
  for (size_t total : {0ul, 1ul, 7ul, 1000ul, 1001ul})
    for (int n = 1; n <= 5; ++n) {
      size_t at = 0;
      for (int k = 0; k < n; ++k) {
        Range r = slice_of(total, k, n);
        EXPECT_EQ(r.begin, at);
        EXPECT_LE(r.size(), total / n + 1);
        EXPECT_GE(r.size(), total / n);
        at = r.end;
      }
      EXPECT_EQ(at, total);
    }
}

TEST(SliceTransfer, EachHolderSendsItsSlice) {
  const std::string state = pattern(kState);
  // The holder's state in three pieces, as State keeps objects apart.
  const Pieces pieces{std::string_view(state).substr(0, 1000), std::string_view(state).substr(1000, 5 << 20),
                      std::string_view(state).substr(1000 + (5 << 20))};
  std::vector<std::unique_ptr<SliceServer>> servers;
  std::vector<std::string> addresses;
  for (int k = 0; k < 3; ++k) {
    servers.push_back(std::move(SliceServer::open("127.0.0.1").value()));
    addresses.push_back(servers.back()->address());
  }
  std::vector<std::future<Result<int64_t>>> sent;
  for (auto& s : servers)
    sent.push_back(std::async(std::launch::async, [&] { return s->serve(pieces, 1, 9, TransferControl{}); }));
  std::string out(kState, '\0');
  std::vector<int64_t> from;
  ASSERT_TRUE(fetch_slices(addresses, out.data(), out.size(), 9, TransferControl{}, &from).is_ok());
  EXPECT_TRUE(out == state);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(from[k], static_cast<int64_t>(slice_of(kState, k, 3).size()));
    EXPECT_EQ(sent[k].get().value(), from[k]);
  }
}

TEST(SliceTransfer, ARequestForAnotherTransferIsRefused) {
  const std::string state = pattern(1000);
  auto server = SliceServer::open("127.0.0.1").value();
  auto sent = std::async(std::launch::async, [&] { return server->serve({state}, 1, 1, TransferControl{}); });
  std::string out(1000, '\0');
  std::vector<int64_t> from;
  EXPECT_FALSE(fetch_slices({server->address()}, out.data(), out.size(), 2, TransferControl{}, &from).is_ok());
  EXPECT_EQ(sent.get().status().code(), StatusCode::kInvalidArgument);
}

// Runs `child` in a forked process that the test SIGKILLs once it has
// worked for a moment; returns when it is dead.
template <typename F>
void killed_midway(F child, int ready_fd) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    child();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready_fd, &c, 1), 1);
  std::this_thread::sleep_for(100ms);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
}

TEST(SliceTransfer, AHolderKilledMidwayFailsTheReceiverAndTheRetryWorks) {
  const std::string state = pattern(kState);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  auto survivor = SliceServer::open("127.0.0.1").value();
  auto doomed = SliceServer::open("127.0.0.1").value();
  const std::vector<std::string> both{survivor->address(), doomed->address()};
  auto first = std::async(std::launch::async, [&] { return survivor->serve({state}, 1, 5, slow()); });
  std::string out(kState, '\0');
  std::vector<int64_t> from;
  auto fetched = std::async(std::launch::async, [&] { return fetch_slices(both, out.data(), kState, 5, slow(), &from); });
  killed_midway([&] { (void)!write(ready[1], "x", 1), (void)doomed->serve({state}, 1, 5, slow()); }, ready[0]);
  Status got = fetched.get();
  EXPECT_EQ(got.code(), StatusCode::kPeerFailed) << got.to_string();
  EXPECT_LT(from[1], static_cast<int64_t>(kState / 2));  // it died midway
  doomed.reset();
  (void)first.get();  // the receiver gave up: the survivor's serve ends too
  // The retry: the survivor alone sends everything.
  auto again = std::async(std::launch::async, [&] { return survivor->serve({state}, 1, 6, TransferControl{}); });
  ASSERT_TRUE(fetch_slices({survivor->address()}, out.data(), kState, 6, TransferControl{}, &from).is_ok());
  EXPECT_EQ(again.get().value(), static_cast<int64_t>(kState));
  EXPECT_TRUE(out == state);
}

TEST(SliceTransfer, AReceiverKilledMidwayFailsTheHolderAndTheRetryWorks) {
  const std::string state = pattern(kState);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  auto server = SliceServer::open("127.0.0.1").value();
  auto serving = std::async(std::launch::async, [&] { return server->serve({state}, 1, 7, slow()); });
  killed_midway(
      [&] {
        std::string out(kState, '\0');
        std::vector<int64_t> from;
        (void)!write(ready[1], "x", 1);
        (void)fetch_slices({server->address()}, out.data(), kState, 7, slow(), &from);
      },
      ready[0]);
  auto failed = serving.get();
  EXPECT_EQ(failed.status().code(), StatusCode::kPeerFailed) << failed.status().to_string();
  auto again = std::async(std::launch::async, [&] { return server->serve({state}, 1, 8, TransferControl{}); });
  std::string out(kState, '\0');
  std::vector<int64_t> from;
  ASSERT_TRUE(fetch_slices({server->address()}, out.data(), kState, 8, TransferControl{}, &from).is_ok());
  EXPECT_TRUE(out == state);
  EXPECT_EQ(again.get().value(), static_cast<int64_t>(kState));
}

}  // namespace
}  // namespace edt::elastic
