#include "engine/engine.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <functional>
#include <future>
#include <numeric>
#include <random>
#include <thread>

#include "edt/store.h"
#include "edt/tcp_store.h"
#include "engine/communicator_collectives.h"
#include "engine/thread_collectives.h"

namespace edt::engine {
namespace {

// Runs `body(rank, engine)` on `size` ranks, each a thread with its own engine.
void run_ranks(int size, const std::function<void(int, Engine&)>& body, EngineOptions options = {}) {
  ThreadGroup group(size);
  std::vector<std::unique_ptr<Engine>> engines;
  for (int r = 0; r < size; ++r) {
    auto e = Engine::start(group.member(r), options);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    engines.push_back(std::move(e).value());
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      body(r, *engines[r]);
      EXPECT_TRUE(engines[r]->shutdown().is_ok());
    });
  }
  for (auto& t : threads) t.join();
}

Meta allreduce_meta(std::vector<int64_t> shape, ReduceOp op = ReduceOp::kSum, DataType dtype = DataType::kFloat32) {
  Meta m;
  m.type = OpType::kAllreduce;
  m.dtype = dtype;
  m.op = op;
  m.shape = std::move(shape);
  return m;
}

Status run(Engine& e, const std::string& name, const Meta& m, void* data, Output* out = nullptr) {
  auto h = e.submit(name, m, data);
  if (!h.is_ok()) return h.status();
  return e.wait(*h, out);
}

TEST(EngineTest, AllreduceInDifferentOrdersOnEachRank) {
  constexpr int kSize = 4, kTensors = 20;
  run_ranks(kSize, [](int rank, Engine& e) {
    std::vector<std::vector<float>> data(kTensors);
    std::vector<int64_t> handles(kTensors);
    std::vector<int> order(kTensors);
    std::iota(order.begin(), order.end(), 0);
    if (rank % 2) std::reverse(order.begin(), order.end());
    for (int t : order) {
      data[t].assign(t + 1, static_cast<float>(rank + t));
      auto h = e.submit("t" + std::to_string(t), allreduce_meta({t + 1}, ReduceOp::kAverage), data[t].data());
      ASSERT_TRUE(h.is_ok());
      handles[t] = *h;
    }
    for (int t = 0; t < kTensors; ++t) {
      ASSERT_TRUE(e.wait(handles[t], nullptr).is_ok());
      for (float v : data[t]) EXPECT_FLOAT_EQ(v, 1.5f + t);  // mean of rank + t over ranks 0..3
    }
  });
}

TEST(EngineTest, AWaitingThreadRunsTheCyclesItself) {
  // The background thread would first cycle 30 s after a submission; wait()
  // does not sleep until then but runs the cycles on the waiting thread.
  EngineOptions slow;
  slow.cycle_time = slow.idle_time = slow.request_delay = std::chrono::seconds(30);
  auto start = std::chrono::steady_clock::now();
  run_ranks(
      2,
      [](int rank, Engine& e) {
        for (int i = 0; i < 10; ++i) {
          std::vector<float> v(5, static_cast<float>(rank + i));
          ASSERT_TRUE(run(e, "v", allreduce_meta({5}), v.data()).is_ok());
          EXPECT_EQ(v, std::vector<float>(5, static_cast<float>(1 + 2 * i)));
        }
      },
      slow);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(EngineTest, RequestsNobodyWaitsForCompleteInTheBackground) {
  // Overlap, as DistributedOptimizer's hooks rely on: after submit() the
  // engine's thread cycles on its own; poll() turns true without wait(),
  // at once by default and after request_delay when one is set. The idle
  // time is longer than the test's deadline: the request itself must wake
  // the thread sleeping through it.
  for (auto delay : {std::chrono::microseconds(0), std::chrono::microseconds(30000)}) {
    EngineOptions options;
    options.idle_time = std::chrono::seconds(60);
    options.request_delay = delay;
    run_ranks(
        3,
        [](int rank, Engine& e) {
          // A request waited for first: the thread has cycled and sleeps.
          std::vector<double> w(1, rank);
          ASSERT_TRUE(e.wait(e.submit("first", allreduce_meta({1}, ReduceOp::kSum, DataType::kFloat64), w.data())
                                 .value(),
                             nullptr)
                          .is_ok());
          std::vector<double> v(1000, rank);
          int64_t h = e.submit("bg", allreduce_meta({1000}, ReduceOp::kSum, DataType::kFloat64), v.data()).value();
          auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (!e.poll(h).value() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          EXPECT_TRUE(e.poll(h).value());
          ASSERT_TRUE(e.wait(h, nullptr).is_ok());
          EXPECT_EQ(v, std::vector<double>(1000, 3.0));
        },
        options);
  }
}

TEST(EngineTest, SmallTensorsAreFused) {
  std::atomic<uint64_t> fused{0};
  run_ranks(2, [&](int rank, Engine& e) {
    std::vector<std::vector<double>> data(50, std::vector<double>(10, rank + 1.0));
    std::vector<int64_t> handles;
    for (int t = 0; t < 50; ++t) {
      handles.push_back(e.submit("g" + std::to_string(t), allreduce_meta({10}, ReduceOp::kSum, DataType::kFloat64),
                                 data[t].data()).value());
    }
    for (auto h : handles) ASSERT_TRUE(e.wait(h, nullptr).is_ok());
    for (auto& d : data) EXPECT_EQ(d, std::vector<double>(10, 3.0));
    if (rank == 0) fused = e.fused_batches();
  });
  EXPECT_GT(fused.load(), 0u);
}

TEST(EngineTest, LargeTensorsAreReducedInTheirOwnMemory) {
  run_ranks(2, [](int rank, Engine& e) {
    constexpr size_t kCount = (2u << 20) / sizeof(float);  // 2 MiB: above the size that is fused
    std::vector<std::vector<float>> data(3, std::vector<float>(kCount, rank + 1.0f));
    std::vector<int64_t> handles;
    for (int t = 0; t < 3; ++t) {
      handles.push_back(e.submit("big" + std::to_string(t), allreduce_meta({static_cast<int64_t>(kCount)}),
                                 data[t].data()).value());
    }
    for (auto h : handles) ASSERT_TRUE(e.wait(h, nullptr).is_ok());
    for (auto& d : data) EXPECT_EQ(d, std::vector<float>(kCount, 3.0f));
    EXPECT_EQ(e.fused_batches(), 0u);
  });
}

TEST(EngineTest, FusionThresholdZeroReducesEachTensorAlone) {
  EngineOptions options;
  options.fusion_threshold = 0;
  run_ranks(2, [](int rank, Engine& e) {
    std::vector<std::vector<int32_t>> data(10, std::vector<int32_t>(3, rank + 2));
    std::vector<int64_t> handles;
    for (int t = 0; t < 10; ++t) {
      handles.push_back(e.submit("p" + std::to_string(t), allreduce_meta({3}, ReduceOp::kProduct, DataType::kInt32),
                                 data[t].data()).value());
    }
    for (auto h : handles) ASSERT_TRUE(e.wait(h, nullptr).is_ok());
    for (auto& d : data) EXPECT_EQ(d, std::vector<int32_t>(3, 6));
    EXPECT_EQ(e.fused_batches(), 0u);
  }, options);
}

TEST(EngineTest, PrescaleAndPostscale) {
  run_ranks(2, [](int rank, Engine& e) {
    std::vector<float> x(4, rank + 1.0f);
    Meta m = allreduce_meta({4});
    m.prescale = 2.0;
    m.postscale = 0.25;
    ASSERT_TRUE(run(e, "s", m, x.data()).is_ok());
    EXPECT_EQ(x, std::vector<float>(4, 1.5f));  // (2*1 + 2*2) / 4
  });
}

TEST(EngineTest, MismatchedShapesFailOnEveryRankNamingBothSides) {
  run_ranks(3, [](int rank, Engine& e) {
    std::vector<float> x(6);
    Meta m = allreduce_meta(rank == 1 ? std::vector<int64_t>{3} : std::vector<int64_t>{2, 3});
    Status s = run(e, "w", m, x.data());
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("Mismatched allreduce tensor shapes: One rank sent a tensor of shape [2, 3], but "
                               "another rank sent a tensor of shape [3]."),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("rank 0 and rank 1"), std::string::npos) << s.message();
    // The engine keeps working after a mismatch.
    std::vector<float> y(2, 1.0f);
    ASSERT_TRUE(run(e, "after", allreduce_meta({2}), y.data()).is_ok());
    EXPECT_EQ(y, std::vector<float>(2, 3.0f));
  });
}

TEST(EngineTest, MismatchedTypesAndOperations) {
  run_ranks(2, [](int rank, Engine& e) {
    std::vector<double> x(4);
    Status s = run(e, "d", allreduce_meta({4}, ReduceOp::kSum, rank ? DataType::kFloat64 : DataType::kFloat32),
                   x.data());
    EXPECT_NE(s.message().find("Mismatched data types: One rank had type float32, but another rank had type float64."),
              std::string::npos)
        << s.message();
    s = run(e, "o", allreduce_meta({4}, rank ? ReduceOp::kMax : ReduceOp::kSum), x.data());
    EXPECT_NE(s.message().find("Mismatched reduction operations: One rank did an op Sum, but another rank did an op Max."),
              std::string::npos)
        << s.message();
    Meta m = allreduce_meta({4});
    if (rank) m.type = OpType::kAllgather;
    s = run(e, "k", m, x.data());
    EXPECT_NE(s.message().find("Mismatched operations: One rank did an allreduce, but another rank did an allgather."),
              std::string::npos)
        << s.message();
    Meta b = allreduce_meta({4});
    b.type = OpType::kBroadcast;
    b.root = rank;
    s = run(e, "b", b, x.data());
    EXPECT_NE(s.message().find("Mismatched broadcast root ranks: One rank specified root rank 0, but another rank "
                               "specified root rank 1."),
              std::string::npos)
        << s.message();
  });
}

TEST(EngineTest, AllgatherBroadcastAlltoallReducescatter) {
  constexpr int kSize = 3;
  run_ranks(kSize, [](int rank, Engine& e) {
    // allgather: rank r sends r+1 rows of 2.
    std::vector<int64_t> rows(2 * (rank + 1), rank);
    Meta g;
    g.type = OpType::kAllgather;
    g.dtype = DataType::kInt64;
    g.shape = {rank + 1, 2};
    Output out;
    ASSERT_TRUE(run(e, "ag", g, rows.data(), &out).is_ok());
    EXPECT_EQ(out.shape, (std::vector<int64_t>{6, 2}));
    std::vector<int64_t> got(out.data.size() / 8);
    std::memcpy(got.data(), out.data.data(), out.data.size());
    EXPECT_EQ(got, (std::vector<int64_t>{0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}));

    std::vector<uint8_t> bytes(5, static_cast<uint8_t>(rank * 10));
    Meta b;
    b.type = OpType::kBroadcast;
    b.dtype = DataType::kUInt8;
    b.shape = {5};
    b.root = 2;
    ASSERT_TRUE(run(e, "bc", b, bytes.data()).is_ok());
    EXPECT_EQ(bytes, std::vector<uint8_t>(5, 20));

    // alltoall: rank r sends d+1 rows to rank d, each row = 100 r + d.
    std::vector<float> send;
    Meta a;
    a.type = OpType::kAlltoall;
    a.dtype = DataType::kFloat32;
    for (int d = 0; d < kSize; ++d) {
      a.splits.push_back(d + 1);
      for (int i = 0; i <= d; ++i) send.push_back(100.0f * rank + d);
    }
    a.shape = {static_cast<int64_t>(send.size())};
    ASSERT_TRUE(run(e, "a2a", a, send.data(), &out).is_ok());
    EXPECT_EQ(out.recv_splits, std::vector<int64_t>(kSize, rank + 1));
    std::vector<float> recv(out.data.size() / 4);
    std::memcpy(recv.data(), out.data.data(), out.data.size());
    std::vector<float> want;
    for (int s = 0; s < kSize; ++s) {
      for (int i = 0; i <= rank; ++i) want.push_back(100.0f * s + rank);
    }
    EXPECT_EQ(recv, want);

    // reducescatter of 7 rows: ranks get 3, 2, 2.
    std::vector<float> rs(7);
    std::iota(rs.begin(), rs.end(), 0.0f);
    Meta r;
    r.type = OpType::kReducescatter;
    r.shape = {7};
    ASSERT_TRUE(run(e, "rs", r, rs.data(), &out).is_ok());
    std::vector<float> mine(out.data.size() / 4);
    std::memcpy(mine.data(), out.data.data(), out.data.size());
    std::vector<std::vector<float>> expected = {{0, 3, 6}, {9, 12}, {15, 18}};
    EXPECT_EQ(mine, expected[rank]);
  });
}

TEST(EngineTest, JoinLetsOtherRanksReduceAndReturnsLastRank) {
  run_ranks(3, [](int rank, Engine& e) {
    if (rank == 2) {
      Output out;
      auto h = e.submit_join();
      ASSERT_TRUE(h.is_ok());
      ASSERT_TRUE(e.wait(*h, &out).is_ok());
      EXPECT_EQ(out.last_joined_rank, 0);
      return;
    }
    // Ranks 0 and 1 reduce twice more; rank 2 adds zeros.
    for (int step = 0; step < 2; ++step) {
      std::vector<float> x(3, 1.0f);
      ASSERT_TRUE(run(e, "j" + std::to_string(step), allreduce_meta({3}), x.data()).is_ok());
      EXPECT_EQ(x, std::vector<float>(3, 2.0f));
    }
    if (rank == 0) {
      // Completes only once ranks 1 and 2 have joined (they add nothing):
      // rank 0 then joins last.
      std::vector<float> x(3, 1.0f);
      ASSERT_TRUE(run(e, "alone", allreduce_meta({3}), x.data()).is_ok());
      EXPECT_EQ(x, std::vector<float>(3, 1.0f));
    }
    Output out;
    ASSERT_TRUE(e.wait(e.submit_join().value(), &out).is_ok());
    EXPECT_EQ(out.last_joined_rank, 0);
  });
}

TEST(EngineTest, DuplicateNameInFlightIsRefused) {
  // Rank 1 submits only after rank 0's second try, so the first is still in
  // flight then (it cannot complete without rank 1).
  std::promise<void> tried;
  std::shared_future<void> tried_done = tried.get_future().share();
  run_ranks(2, [&](int rank, Engine& e) {
    std::vector<float> x(1), y(1);
    if (rank == 0) {
      auto h = e.submit("same", allreduce_meta({1}), x.data());
      ASSERT_TRUE(h.is_ok());
      auto again = e.submit("same", allreduce_meta({1}), y.data());
      tried.set_value();
      ASSERT_FALSE(again.is_ok());
      EXPECT_NE(again.status().message().find("same name as another tensor"), std::string::npos);
      ASSERT_TRUE(e.wait(*h, nullptr).is_ok());
    } else {
      tried_done.wait();
      ASSERT_TRUE(run(e, "same", allreduce_meta({1}), x.data()).is_ok());
    }
  });
}

TEST(EngineTest, BadRequestsFailAtSubmit) {
  run_ranks(2, [](int, Engine& e) {
    std::vector<float> x(4);
    Meta b = allreduce_meta({4});
    b.type = OpType::kBroadcast;
    b.root = 5;
    auto h = e.submit("b", b, x.data());
    ASSERT_FALSE(h.is_ok());
    EXPECT_NE(h.status().message().find("root rank 5 is out of range"), std::string::npos);
    Meta a = allreduce_meta({4});
    a.type = OpType::kAlltoall;
    a.splits = {1, 2};
    h = e.submit("a", a, x.data());
    ASSERT_FALSE(h.is_ok());
    EXPECT_NE(h.status().message().find("splits add up to 3 but the first dimension is 4"), std::string::npos);
  });
}

TEST(EngineTest, AbortedCollectivesFailPendingRequestsInsteadOfHanging) {
  ThreadGroup group(2);
  auto e0 = std::move(Engine::start(group.member(0), {})).value();
  auto e1 = std::move(Engine::start(group.member(1), {})).value();
  std::vector<float> x(2);
  auto h = e0->submit("never", allreduce_meta({2}), x.data());  // rank 1 never sends it
  ASSERT_TRUE(h.is_ok());
  group.abort();
  Status s = e0->wait(*h, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kPeerFailed) << s.to_string();
  EXPECT_FALSE(e0->submit("later", allreduce_meta({2}), x.data()).is_ok());
  EXPECT_FALSE(e0->shutdown().is_ok());
  EXPECT_FALSE(e1->shutdown().is_ok());
}

TEST(EngineTest, ShutdownFailsRequestsThatWaitForTheRankThatLeft) {
  run_ranks(2, [](int rank, Engine& e) {
    if (rank == 1) return;  // shuts down at once
    std::vector<float> x(2);
    Status s = run(e, "orphan", allreduce_meta({2}), x.data());
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("rank 1 has shut down"), std::string::npos) << s.message();
  });
}

TEST(EngineTest, OneRanksShutdownEndsEveryRanksEngineWithoutWaitingForThem) {
  // Two engines per rank, as a job with a process set has. Rank 1 leaves
  // early (an exception skipped its last collective): it shuts down the
  // set's engine, then the job's. Rank 0 waits in the job's engine for a
  // request rank 1 never makes, and would shut down the set's engine only
  // afterwards. Had shutdown() waited for every rank, both would wait
  // forever; as in Horovod, rank 1's shutdown ends rank 0's engines.
  ThreadGroup job_group(2), set_group(2);
  std::vector<std::unique_ptr<Engine>> job, set;
  for (int r = 0; r < 2; ++r) {
    job.push_back(std::move(Engine::start(job_group.member(r), {})).value());
    set.push_back(std::move(Engine::start(set_group.member(r), {})).value());
  }
  std::thread leaver([&] {
    EXPECT_TRUE(set[1]->shutdown().is_ok());
    EXPECT_TRUE(job[1]->shutdown().is_ok());
  });
  std::vector<float> x(2);
  Status s = run(*job[0], "skipped by rank 1", allreduce_meta({2}), x.data());
  EXPECT_NE(s.message().find("rank 1 has shut down"), std::string::npos) << s.to_string();
  leaver.join();
  EXPECT_TRUE(job[0]->ended());
  Result<int64_t> later = job[0]->submit("later", allreduce_meta({2}), x.data());
  ASSERT_FALSE(later.is_ok());
  EXPECT_NE(later.status().message().find("rank 1 has shut down, which ends the collectives of every rank"),
            std::string::npos)
      << later.status().to_string();
  EXPECT_TRUE(set[0]->shutdown().is_ok());
  EXPECT_TRUE(job[0]->shutdown().is_ok());
}

// Many threads in wait() at once (edt's TensorFlow ops once waited for each
// request on a thread of its own): the waiting threads take turns running
// the cycles, and every rank must still run the same collectives in the
// same order. One round: this rank submits kManyRequests, in an order of
// its own, and waits for each on a thread of its own. On odd rounds each
// waiter starts right after its request is submitted (and cycles while
// later ones are submitted), on even rounds once all are, in yet another
// order. Tensors: small ones (fused), one above the communicators'
// one-round size, one reduced alone (engine.cc, kReducedAloneBytes), and
// allgathers of rank + 1 rows of kGatherRow floats. Returns the rounds'
// statuses and outputs by request.
constexpr int kManyRequests = 12, kGatherRow = 3;

bool is_gather(int i) { return i % 3 == 2; }

void many_waiters_round(Engine& e, int round, std::mt19937& rng, std::vector<std::vector<float>>* data,
                        std::vector<Status>* statuses, std::vector<Output>* outputs) {
  const int rank = e.rank();
  std::vector<int64_t> handles(kManyRequests);
  std::vector<std::thread> waiters;
  auto wait_on_own_thread = [&](int i) {
    waiters.emplace_back([&, i] { (*statuses)[i] = e.wait(handles[i], &(*outputs)[i]); });
  };
  std::vector<int> order(kManyRequests);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (int i : order) {
    const int64_t count = i == 0 ? 300007 : i == 1 ? 40000 : (i + 1) * 64;
    Meta m = is_gather(i) ? allreduce_meta({rank + 1, kGatherRow}) : allreduce_meta({count});
    if (is_gather(i)) m.type = OpType::kAllgather;
    (*data)[i].assign(static_cast<size_t>(num_elements(m.shape)), static_cast<float>(rank + round + i));
    auto h = e.submit("t" + std::to_string(i), m, (*data)[i].data());
    handles[i] = h.is_ok() ? *h : -1;  // a refused request fails its wait
    if (round % 2) wait_on_own_thread(i);
  }
  std::shuffle(order.begin(), order.end(), rng);
  if (round % 2 == 0)
    for (int i : order) wait_on_own_thread(i);
  for (auto& t : waiters) t.join();
}

void check_many_waiters_round(int rank, int round, const std::vector<std::vector<float>>& data,
                              const std::vector<Status>& statuses, const std::vector<Output>& outputs) {
  for (int i = 0; i < kManyRequests; ++i) {
    SCOPED_TRACE("rank " + std::to_string(rank) + " round " + std::to_string(round) + " t" + std::to_string(i));
    ASSERT_TRUE(statuses[i].is_ok()) << statuses[i].to_string();
    const float base = static_cast<float>(round + i);
    if (!is_gather(i)) {
      EXPECT_EQ(data[i], std::vector<float>(data[i].size(), 2 * base + 1));
      continue;
    }
    std::vector<float> gathered(kGatherRow, base);  // rank 0's row, then rank 1's two
    gathered.insert(gathered.end(), 2 * kGatherRow, base + 1);
    EXPECT_EQ(outputs[i].shape, (std::vector<int64_t>{3, kGatherRow}));
    const auto* f = reinterpret_cast<const float*>(outputs[i].data.data());
    EXPECT_EQ(std::vector<float>(f, f + outputs[i].data.size() / sizeof(float)), gathered);
  }
}

// Runs the rounds on ranks of a job of 2 whose engines run over `backends`
// (both, or one where the other rank is another process). Should the ranks
// fall out of step, a watchdog calls abort(), which makes every collective
// of this process fail as a dead peer would: the test fails instead of
// hanging.
void wait_from_many_threads_at_once(std::vector<std::unique_ptr<CollectiveBackend>> backends,
                                    const std::function<void()>& abort, EngineOptions options = {}) {
  constexpr int kRounds = 200;
  std::vector<std::unique_ptr<Engine>> engines;
  for (auto& b : backends) engines.push_back(std::move(Engine::start(std::move(b), options)).value());
  std::atomic<bool> finished{false}, aborted{false};
  std::atomic<int> rounds_done{0};  // by all ranks together
  std::thread watchdog([&] {
    constexpr auto kStuck = std::chrono::seconds(30);
    int seen = 0;
    auto last_progress = std::chrono::steady_clock::now();
    for (; !finished; std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
      if (int now = rounds_done; now != seen) {
        seen = now;
        last_progress = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - last_progress > kStuck) {
        aborted = true;
        ADD_FAILURE() << "the ranks' collectives fell out of step: no round finished within 30 s";
        abort();
        return;
      }
    }
  });
  auto rank_body = [&](Engine& e) {
    std::mt19937 rng(7919 * e.rank() + 1);
    for (int round = 0; round < kRounds && !aborted && !::testing::Test::HasFatalFailure(); ++round) {
      std::vector<std::vector<float>> data(kManyRequests);
      std::vector<Status> statuses(kManyRequests);
      std::vector<Output> outputs(kManyRequests);
      many_waiters_round(e, round, rng, &data, &statuses, &outputs);
      ++rounds_done;
      if (!aborted) check_many_waiters_round(e.rank(), round, data, statuses, outputs);
    }
  };
  std::vector<std::thread> ranks;
  for (auto& e : engines) ranks.emplace_back(rank_body, std::ref(*e));
  for (auto& t : ranks) t.join();
  finished = true;
  watchdog.join();
  for (auto& e : engines) EXPECT_EQ(e->shutdown().is_ok(), !aborted);
}

TEST(EngineTest, ManyThreadsWaitingAtOnceKeepTheRanksInStep) {
  ThreadGroup group(2);
  std::vector<std::unique_ptr<CollectiveBackend>> backends;
  for (int r = 0; r < 2; ++r) backends.push_back(group.member(r));
  wait_from_many_threads_at_once(std::move(backends), [&] { group.abort(); });
}

// A rank of 2 on one host ("shm") or over loopback TCP ("tcp").
CommunicatorOptions two_rank_options(int rank, const char* transport) {
  CommunicatorOptions o;
  o.rank = rank;
  o.size = 2;
  o.host = "hostA";
  o.bind_address = "127.0.0.1";
  o.transport = transport;
  o.timeout = std::chrono::seconds(30);
  return o;
}

// The same over libedt's communicators (ranks as threads of this process),
// whose transports keep state between calls: shared memory, then TCP.
TEST(EngineTest, ManyThreadsWaitingAtOnceOverCommunicators) {
  for (const char* transport : {"shm", "tcp"}) {
    SCOPED_TRACE(std::string("transport '") + transport + "'");
    auto store = std::make_shared<MemoryStore>();
    std::vector<std::shared_ptr<Communicator>> comms(2);
    std::vector<std::thread> creators;
    for (int r = 0; r < 2; ++r) {
      creators.emplace_back([&, r] {
        auto c = Communicator::create(store, two_rank_options(r, transport));
        ASSERT_TRUE(c.is_ok()) << c.status().to_string();
        comms[r] = *c;
      });
    }
    for (auto& t : creators) t.join();
    ASSERT_TRUE(comms[0] && comms[1]);
    std::vector<std::unique_ptr<CollectiveBackend>> backends;
    for (auto& c : comms) backends.push_back(communicator_collectives(c));
    wait_from_many_threads_at_once(std::move(backends), [&] {
      for (auto& c : comms) c->abort();
    });
  }
}

// One rank of ManyThreadsWaitingAtOnceInTwoProcesses, its store served by
// rank 0's process.
void many_waiters_rank(int rank, const char* transport, std::shared_ptr<Store> store) {
  auto comm = Communicator::create(std::move(store), two_rank_options(rank, transport));
  ASSERT_TRUE(comm.is_ok()) << "rank " << rank << ": " << comm.status().to_string();
  std::vector<std::unique_ptr<CollectiveBackend>> backends;
  backends.push_back(communicator_collectives(*comm));
  EngineOptions options;
  options.request_delay = options.idle_time;  // as where the ranks have no core to spare
  wait_from_many_threads_at_once(std::move(backends), [&] { (*comm)->abort(); }, options);
}

// The same with the ranks in two processes, as a job runs them, over shared
// memory and then TCP. The child forks before any thread of this test
// starts and learns the store's port through a pipe.
TEST(EngineTest, ManyThreadsWaitingAtOnceInTwoProcesses) {
  for (const char* transport : {"shm", "tcp"}) {
    SCOPED_TRACE(std::string("transport '") + transport + "'");
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    fflush(nullptr);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(pipe_fds[1]);
      uint16_t port = 0;
      if (read(pipe_fds[0], &port, sizeof port) != sizeof port) _exit(2);
      auto store = connect_tcp_store("127.0.0.1", port);
      if (!store.is_ok()) _exit(3);
      many_waiters_rank(1, transport, *store);
      _exit(::testing::Test::HasFailure() ? 1 : 0);
    }
    close(pipe_fds[0]);
    auto server = TcpStoreServer::start({"127.0.0.1", 0});
    const uint16_t port = server.is_ok() ? (*server)->port() : 0;
    EXPECT_EQ(write(pipe_fds[1], &port, sizeof port), static_cast<ssize_t>(sizeof port));
    close(pipe_fds[1]);
    if (server.is_ok()) many_waiters_rank(0, transport, (*server)->local_store());
    // The child ends on its own (its watchdog, its communicator's timeout);
    // should it not, it is killed rather than waited for forever.
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (waitpid(child, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(server.is_ok()) << server.status().to_string();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank 1 (the child) failed: status " << status;
  }
}

TEST(EngineOptionsTest, FromEnvironment) {
  setenv("HOROVOD_FUSION_THRESHOLD", "1048576", 1);
  setenv("HOROVOD_CYCLE_TIME", "2.5", 1);
  setenv("EDT_IDLE_CYCLE_TIME", "40", 1);
  auto o = engine_options_from_env();
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->fusion_threshold, 1u << 20);
  EXPECT_EQ(o->cycle_time.count(), 2500);
  EXPECT_EQ(o->idle_time.count(), 40000);
  unsetenv("EDT_IDLE_CYCLE_TIME");
  setenv("EDT_FUSION_THRESHOLD", "64M", 1);
  EXPECT_EQ(engine_options_from_env()->fusion_threshold, 64u << 20);
  // EDT_REQUEST_DELAY: idle_time when the host's processes fill its cores.
  cpu_set_t cores;
  if (sched_getaffinity(0, sizeof cores, &cores) == 0 && CPU_COUNT(&cores) > 1) {
    EXPECT_EQ(engine_options_from_env(1)->request_delay.count(), 0);
  }
  EXPECT_EQ(engine_options_from_env(4096)->request_delay.count(), 25000);
  setenv("EDT_REQUEST_DELAY", "0.5", 1);
  EXPECT_EQ(engine_options_from_env(4096)->request_delay.count(), 500);
  setenv("EDT_REQUEST_DELAY", "auto", 1);
  EXPECT_EQ(engine_options_from_env(4096)->request_delay.count(), 25000);
  setenv("EDT_REQUEST_DELAY", "soon", 1);
  EXPECT_NE(engine_options_from_env().status().message().find("EDT_REQUEST_DELAY"), std::string::npos);
  unsetenv("EDT_REQUEST_DELAY");
  setenv("HOROVOD_CYCLE_TIME", "fast", 1);
  o = engine_options_from_env();
  ASSERT_FALSE(o.is_ok());
  EXPECT_NE(o.status().message().find("HOROVOD_CYCLE_TIME"), std::string::npos);
  unsetenv("HOROVOD_FUSION_THRESHOLD");
  unsetenv("EDT_FUSION_THRESHOLD");
  unsetenv("HOROVOD_CYCLE_TIME");
  EXPECT_EQ(engine_options_from_env()->fusion_threshold, 128u << 20);
}

}  // namespace
}  // namespace edt::engine
