// Every collective over every transport, with N ranks as threads of this
// process sharing one MemoryStore. Host identities decide the transport:
// one host -> shared memory, one host per rank with EDT_TRANSPORT=tcp -> TCP,
// two hosts -> hierarchical (shared memory inside, TCP across).
#include "edt/communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <cmath>
#include <functional>
#include <numeric>
#include <thread>

#include "kernels/reduce.h"

namespace edt {
namespace {

using std::chrono::milliseconds;

enum class Topology { kShm, kTcp, kTwoHosts };

const char* topology_name(Topology t) {
  switch (t) {
    case Topology::kShm: return "shm";
    case Topology::kTcp: return "tcp";
    case Topology::kTwoHosts: return "two_hosts";
  }
  return "?";
}

// The host names are identities only: the listener is given its address, so
// that no test waits for a resolver to give up on "hostA" (5 s where DNS
// does not answer, longer than some of the tests' timeouts).
CommunicatorOptions options_for(Topology t, int rank, int size, milliseconds timeout = milliseconds(20000)) {
  CommunicatorOptions o;
  o.rank = rank;
  o.size = size;
  o.timeout = timeout;
  o.bind_address = "127.0.0.1";
  switch (t) {
    case Topology::kShm: o.host = "hostA"; break;
    case Topology::kTcp:
      o.host = "hostA";
      o.transport = "tcp";
      break;
    case Topology::kTwoHosts: o.host = rank < (size + 1) / 2 ? "hostA" : "hostB"; break;
  }
  return o;
}

// Runs body(comm) on `size` threads, one communicator each; fails the test
// with the rank's message if create() or the body reports an error.
void run_ranks(Topology t, int size, const std::function<void(Communicator&)>& body,
               milliseconds timeout = milliseconds(20000)) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto comm = Communicator::create(store, options_for(t, r, size, timeout));
      ASSERT_TRUE(comm.is_ok()) << "rank " << r << ": " << comm.status().to_string();
      body(**comm);
    });
  }
  for (auto& th : threads) th.join();
}

// The awkward counts every collective is run with.
const size_t kCounts[] = {0, 1, 7, 1023, 4099, 300007};

float value(int rank, size_t i) { return float((rank + 1) * int(i % 7 + 1)); }

class Collectives : public ::testing::TestWithParam<std::tuple<Topology, int>> {
 protected:
  Topology topology() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }
};

TEST_P(Collectives, AllreduceSumEveryCountInAndOutOfPlace) {
  const int n = ranks();
  run_ranks(topology(), n, [&](Communicator& c) {
    for (size_t count : kCounts) {
      for (bool in_place : {false, true}) {
        std::vector<float> send(count), recv(count, -1.0f);
        for (size_t i = 0; i < count; ++i) send[i] = value(c.rank(), i);
        float* out = in_place ? send.data() : recv.data();
        Status s = c.allreduce(send.data(), out, count, DataType::kFloat32, ReduceOp::kSum);
        ASSERT_TRUE(s.is_ok()) << s.to_string();
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(out[i], float((i % 7 + 1) * n * (n + 1) / 2)) << "count " << count << " i " << i;
      }
    }
  });
}

// 12 MB of float32, past the size where the output is written with
// streaming stores; the rank count is not the point, so only up to 3.
TEST(LargeAllreduce, StreamsItsOutputOnEveryTransport) {
  const size_t count = 3000017;
  for (Topology t : {Topology::kShm, Topology::kTcp, Topology::kTwoHosts}) {
    for (int n = 2; n <= 3; ++n) {
      run_ranks(t, n, [&](Communicator& c) {
        std::vector<float> send(count), recv(count, -1.0f);
        for (size_t i = 0; i < count; ++i) send[i] = value(c.rank(), i);
        ASSERT_TRUE(c.allreduce(send.data(), recv.data(), count, DataType::kFloat32, ReduceOp::kSum).is_ok());
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(recv[i], float((i % 7 + 1) * n * (n + 1) / 2)) << topology_name(t) << " " << i;
        // An average divides every chunk's slices exactly once.
        ASSERT_TRUE(c.allreduce(send.data(), recv.data(), count, DataType::kFloat32, ReduceOp::kAverage).is_ok());
        for (size_t i = 0; i < count; ++i)
          ASSERT_FLOAT_EQ(recv[i], float((i % 7 + 1) * n * (n + 1) / 2) / n) << topology_name(t) << " " << i;
      });
    }
  }
}

TEST_P(Collectives, AllreduceEveryOpAndType) {
  const int n = ranks();
  run_ranks(topology(), n, [&](Communicator& c) {
    for (DataType type : kAllDataTypes) {
      for (ReduceOp op : kAllReduceOps) {
        for (size_t count : {size_t(5), size_t(70001)}) {
          const size_t es = dtype_size(type);
          std::vector<uint8_t> buf(count * es);
          // Values 1..3 keep products of 8 ranks in range for every type.
          auto v = [&](int rank, size_t i) { return double((rank + int(i)) % 3 + 1); };
          auto put = [&](size_t i, double x) {
            switch (type) {
              case DataType::kFloat32: reinterpret_cast<float*>(buf.data())[i] = float(x); break;
              case DataType::kFloat64: reinterpret_cast<double*>(buf.data())[i] = x; break;
              case DataType::kFloat16: reinterpret_cast<uint16_t*>(buf.data())[i] = kernels::float_to_half(float(x)); break;
              case DataType::kBFloat16: reinterpret_cast<uint16_t*>(buf.data())[i] = kernels::float_to_bfloat16(float(x)); break;
              case DataType::kInt32: reinterpret_cast<int32_t*>(buf.data())[i] = int32_t(x); break;
              case DataType::kInt64: reinterpret_cast<int64_t*>(buf.data())[i] = int64_t(x); break;
              case DataType::kUInt8: buf[i] = uint8_t(x); break;
            }
          };
          auto get = [&](size_t i) -> double {
            switch (type) {
              case DataType::kFloat32: return reinterpret_cast<float*>(buf.data())[i];
              case DataType::kFloat64: return reinterpret_cast<double*>(buf.data())[i];
              case DataType::kFloat16: return kernels::half_to_float(reinterpret_cast<uint16_t*>(buf.data())[i]);
              case DataType::kBFloat16: return kernels::bfloat16_to_float(reinterpret_cast<uint16_t*>(buf.data())[i]);
              case DataType::kInt32: return reinterpret_cast<int32_t*>(buf.data())[i];
              case DataType::kInt64: return double(reinterpret_cast<int64_t*>(buf.data())[i]);
              case DataType::kUInt8: return buf[i];
            }
            return 0;
          };
          for (size_t i = 0; i < count; ++i) put(i, v(c.rank(), i));
          Status s = c.allreduce(buf.data(), buf.data(), count, type, op);
          ASSERT_TRUE(s.is_ok()) << s.to_string();
          for (size_t i = 0; i < count; i += 997) {
            double sum = 0, prod = 1, lo = 1e9, hi = -1e9;
            for (int r = 0; r < n; ++r) {
              sum += v(r, i), prod *= v(r, i);
              lo = std::min(lo, v(r, i)), hi = std::max(hi, v(r, i));
            }
            double want = op == ReduceOp::kSum       ? sum
                          : op == ReduceOp::kProduct ? prod
                          : op == ReduceOp::kMin     ? lo
                          : op == ReduceOp::kMax     ? hi
                                                     : sum / n;
            const bool is_int = type == DataType::kInt32 || type == DataType::kInt64 || type == DataType::kUInt8;
            if (is_int) want = std::trunc(want);
            if (type == DataType::kUInt8) want = double(int64_t(want) & 0xff);
            // Products up to 3^8 and sums stay exact except in bfloat16 (8-bit
            // mantissa) and float16 above 2048; allow their rounding.
            double tol = type == DataType::kBFloat16 ? std::abs(want) / 64 + 0.05
                         : type == DataType::kFloat16 ? std::abs(want) / 512 + 0.01
                         : is_int                     ? 0
                                                      : 1e-6 * std::abs(want);
            ASSERT_NEAR(get(i), want, tol) << dtype_name(type) << " " << reduce_op_name(op) << " count " << count
                                           << " i " << i;
          }
        }
      }
    }
  });
}

TEST_P(Collectives, Broadcast) {
  const int n = ranks();
  run_ranks(topology(), n, [&](Communicator& c) {
    for (size_t count : kCounts) {
      for (int root : {0, n - 1}) {
        std::vector<int32_t> buf(count, -1);
        if (c.rank() == root)
          for (size_t i = 0; i < count; ++i) buf[i] = int32_t(i * 3 + root);
        Status s = c.broadcast(buf.data(), count, DataType::kInt32, root);
        ASSERT_TRUE(s.is_ok()) << s.to_string();
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(buf[i], int32_t(i * 3 + root)) << "count " << count;
      }
    }
    // Large enough for the pipelined chain.
    std::vector<uint8_t> big(3 << 20);
    if (c.rank() == 1 % n) std::iota(big.begin(), big.end(), uint8_t(7));
    ASSERT_TRUE(c.broadcast(big.data(), big.size(), DataType::kUInt8, 1 % n).is_ok());
    for (size_t i = 0; i < big.size(); i += 4097) ASSERT_EQ(big[i], uint8_t(7 + i));
  });
}

TEST_P(Collectives, AllgatherAndAllgatherv) {
  const int n = ranks();
  run_ranks(topology(), n, [&](Communicator& c) {
    for (size_t count : kCounts) {
      std::vector<int64_t> send(count), recv(count * n, -1);
      for (size_t i = 0; i < count; ++i) send[i] = int64_t(c.rank()) * 1000000 + int64_t(i);
      ASSERT_TRUE(c.allgather(send.data(), recv.data(), count, DataType::kInt64).is_ok());
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(recv[r * count + i], int64_t(r) * 1000000 + int64_t(i));
      // In place: this rank's block already sits in recv.
      std::vector<int64_t> inplace(count * n, -1);
      std::copy(send.begin(), send.end(), inplace.begin() + c.rank() * count);
      ASSERT_TRUE(c.allgather(inplace.data() + c.rank() * count, inplace.data(), count, DataType::kInt64).is_ok());
      ASSERT_EQ(inplace, recv);

      // Uneven blocks, some empty.
      std::vector<size_t> counts(n);
      for (int r = 0; r < n; ++r) counts[r] = (r % 3 == 1) ? 0 : count / size_t(r + 1);
      std::vector<int64_t> mine(counts[c.rank()]);
      for (size_t i = 0; i < mine.size(); ++i) mine[i] = int64_t(c.rank()) * 1000000 + int64_t(i);
      std::vector<int64_t> all(std::accumulate(counts.begin(), counts.end(), size_t(0)), -1);
      ASSERT_TRUE(c.allgatherv(mine.data(), all.data(), counts, DataType::kInt64).is_ok());
      size_t at = 0;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < counts[r]; ++i) ASSERT_EQ(all[at++], int64_t(r) * 1000000 + int64_t(i));
    }
  });
}

TEST_P(Collectives, ReduceScatter) {
  const int n = ranks();
  run_ranks(topology(), n, [&](Communicator& c) {
    for (size_t count : kCounts) {
      std::vector<int32_t> send(count * n), recv(count, -1);
      for (int j = 0; j < n; ++j)
        for (size_t i = 0; i < count; ++i) send[j * count + i] = c.rank() + j + int32_t(i % 1000);
      ASSERT_TRUE(c.reduce_scatter(send.data(), recv.data(), count, DataType::kInt32, ReduceOp::kSum).is_ok());
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(recv[i], n * (n - 1) / 2 + n * (c.rank() + int32_t(i % 1000))) << "count " << count;
    }
  });
}

TEST_P(Collectives, Alltoall) {
  const int n = ranks();
  run_ranks(topology(), n, [&](Communicator& c) {
    for (size_t count : kCounts) {
      if (count > 5000) continue;  // n * n blocks: keep it small
      for (bool in_place : {false, true}) {
        std::vector<int32_t> send(count * n), recv(count * n, -1);
        for (int j = 0; j < n; ++j)
          for (size_t i = 0; i < count; ++i) send[j * count + i] = c.rank() * 100000 + j * 1000 + int32_t(i % 1000);
        int32_t* out = in_place ? send.data() : recv.data();
        ASSERT_TRUE(c.alltoall(send.data(), out, count, DataType::kInt32).is_ok());
        for (int src = 0; src < n; ++src)
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(out[src * count + i], src * 100000 + c.rank() * 1000 + int32_t(i % 1000));
      }
    }
  });
}

TEST_P(Collectives, BarrierAndAsyncInOrder) {
  const int n = ranks();
  std::atomic<int> arrived{0};
  run_ranks(topology(), n, [&](Communicator& c) {
    ++arrived;
    ASSERT_TRUE(c.barrier().is_ok());
    EXPECT_EQ(arrived.load(), n);  // nobody leaves the barrier early
    std::vector<std::vector<float>> bufs(6, std::vector<float>(20000));
    std::vector<std::shared_ptr<Work>> works;
    for (size_t k = 0; k < bufs.size(); ++k) {
      std::fill(bufs[k].begin(), bufs[k].end(), float(k + c.rank()));
      works.push_back(c.allreduce_async(bufs[k].data(), bufs[k].data(), bufs[k].size(), DataType::kFloat32,
                                        ReduceOp::kMax));
    }
    works.push_back(c.barrier_async());
    // A blocking call after async ones runs after them.
    float one = 1;
    ASSERT_TRUE(c.allreduce(&one, &one, 1, DataType::kFloat32, ReduceOp::kSum).is_ok());
    EXPECT_EQ(one, float(n));
    for (auto& w : works) ASSERT_TRUE(w->wait(milliseconds(20000)).is_ok());
    for (size_t k = 0; k < bufs.size(); ++k) {
      EXPECT_TRUE(works[k]->is_completed());
      EXPECT_EQ(bufs[k][0], float(k + n - 1));
      EXPECT_EQ(bufs[k][19999], float(k + n - 1));
    }
  });
}

TEST_P(Collectives, TopologyIsReported) {
  const int n = ranks();
  run_ranks(topology(), n, [&](Communicator& c) {
    EXPECT_EQ(c.size(), n);
    if (topology() == Topology::kTwoHosts && n > 1) {
      const int first = (n + 1) / 2;  // ranks on host A; B has one fewer when n is odd
      // Horovod's cross size: the hosts that have this local rank (A's last
      // rank has no counterpart on B when n is odd).
      const bool alone = c.local_rank() >= n - first;
      EXPECT_EQ(c.cross_size(), alone ? 1 : 2);
      EXPECT_EQ(c.cross_rank(), c.rank() < first ? 0 : 1);
      EXPECT_EQ(c.local_size(), c.rank() < first ? first : n - first);
      EXPECT_EQ(c.local_rank(), c.rank() < first ? c.rank() : c.rank() - first);
    } else {
      EXPECT_EQ(c.cross_size(), 1);
      EXPECT_EQ(c.local_size(), n);
      EXPECT_EQ(c.local_rank(), c.rank());
    }
  });
}

std::string Name(const ::testing::TestParamInfo<Collectives::ParamType>& info) {
  return std::string(topology_name(std::get<0>(info.param))) + "_" + std::to_string(std::get<1>(info.param)) +
         "ranks";
}

INSTANTIATE_TEST_SUITE_P(Shm, Collectives, ::testing::Combine(::testing::Values(Topology::kShm), ::testing::Range(1, 9)),
                         Name);
INSTANTIATE_TEST_SUITE_P(Tcp, Collectives, ::testing::Combine(::testing::Values(Topology::kTcp), ::testing::Range(1, 9)),
                         Name);
INSTANTIATE_TEST_SUITE_P(TwoHosts, Collectives,
                         ::testing::Combine(::testing::Values(Topology::kTwoHosts), ::testing::Range(2, 9)), Name);

// --- bad input -------------------------------------------------------------

class BadInput : public ::testing::TestWithParam<Topology> {};

TEST_P(BadInput, CountMismatchNamesBothSidesOnEveryRankAndStaysUsable) {
  run_ranks(GetParam(), 3, [&](Communicator& c) {
    std::vector<float> buf(12, 1.0f);
    size_t count = c.rank() == 1 ? 12 : 10;
    Status s = c.allreduce(buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kSum);
    ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("allreduce mismatch: rank 0 sent float32 x 10 elements"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("rank 1 sent float32 x 12 elements"), std::string::npos) << s.message();
    // No data moved, and the next call works.
    EXPECT_EQ(buf[0], 1.0f);
    ASSERT_TRUE(c.allreduce(buf.data(), buf.data(), 12, DataType::kFloat32, ReduceOp::kSum).is_ok());
    EXPECT_EQ(buf[11], 3.0f);
  });
}

TEST_P(BadInput, DtypeOpRootAndKindMismatches) {
  run_ranks(GetParam(), 2, [&](Communicator& c) {
    std::vector<double> buf(8, 1.0);
    Status s = c.allreduce(buf.data(), buf.data(), 4, c.rank() == 0 ? DataType::kFloat64 : DataType::kInt64,
                           ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("rank 0 sent float64 x 4"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rank 1 sent int64 x 4"), std::string::npos) << s.message();

    s = c.allreduce(buf.data(), buf.data(), 4, DataType::kFloat64, c.rank() == 0 ? ReduceOp::kSum : ReduceOp::kMax);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("(max)"), std::string::npos) << s.message();

    s = c.broadcast(buf.data(), 4, DataType::kFloat64, c.rank());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("root 1"), std::string::npos) << s.message();

    s = c.rank() == 0 ? c.barrier() : c.broadcast(buf.data(), 4, DataType::kFloat64, 0);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("rank 0 called barrier"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rank 1 called broadcast"), std::string::npos) << s.message();

    // One rank's own bad argument fails every rank, not only that one.
    s = c.broadcast(buf.data(), 4, DataType::kFloat64, c.rank() == 0 ? 0 : 5);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    if (c.rank() == 1) EXPECT_NE(s.message().find("root 5 is not a rank"), std::string::npos) << s.message();
    else EXPECT_NE(s.message().find("rank 1 passed invalid arguments"), std::string::npos) << s.message();

    std::vector<size_t> counts = {2, c.rank() == 0 ? size_t(2) : size_t(3)};
    s = c.allgatherv(buf.data(), buf.data() + 4, counts, DataType::kFloat64);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("different recv_counts"), std::string::npos) << s.message();

    ASSERT_TRUE(c.barrier().is_ok());
  });
}

TEST_P(BadInput, SilentPeerTimesOut) {
  std::atomic<bool> done{false};
  run_ranks(
      GetParam(), 2,
      [&](Communicator& c) {
        if (c.rank() == 1) {  // alive, but never joins the allreduce
          while (!done.load()) std::this_thread::sleep_for(milliseconds(10));
          return;
        }
        float x = 1;
        auto start = std::chrono::steady_clock::now();
        Status s = c.allreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
        EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
        EXPECT_NE(s.message().find("rank 1 (host"), std::string::npos) << s.message();
        EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
        // Broken from now on: fails at once with the same error.
        EXPECT_EQ(c.barrier().code(), StatusCode::kTimeout);
        done = true;
      },
      milliseconds(800));
}

TEST_P(BadInput, AbortFailsPendingWorkAndWakesPeers) {
  run_ranks(GetParam(), 2, [&](Communicator& c) {
    std::vector<float> buf(1 << 20, 1.0f);
    if (c.rank() == 0) {
      std::this_thread::sleep_for(milliseconds(200));
      c.abort();
      auto w = c.allreduce_async(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
      EXPECT_EQ(w->wait(milliseconds(5000)).code(), StatusCode::kAborted);
      return;
    }
    auto start = std::chrono::steady_clock::now();
    Status s = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
    EXPECT_FALSE(s.is_ok());
    EXPECT_TRUE(s.code() == StatusCode::kPeerFailed || s.code() == StatusCode::kAborted) << s.to_string();
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
  });
}

// The pipelined hierarchy (16 MiB on 2 hosts of 2) with a rank that aborts
// instead of joining: its host's leader fails in the shared-memory stage,
// the other host's leader in its cross-host thread, and the rank waiting for
// the broadcast after it; every rank errs within seconds, none hangs.
TEST(PipelinedHierarchy, AbortOfOneRankFailsEveryRank) {
  run_ranks(Topology::kTwoHosts, 4, [&](Communicator& c) {
    std::vector<float> buf(4 << 20, 1.0f);
    ASSERT_TRUE(c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum).is_ok());
    EXPECT_EQ(buf[123], 4.0f);
    if (c.rank() == 3) {
      std::this_thread::sleep_for(milliseconds(300));
      c.abort();
      return;
    }
    auto start = std::chrono::steady_clock::now();
    Status s = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
    EXPECT_TRUE(s.code() == StatusCode::kPeerFailed || s.code() == StatusCode::kAborted) << s.to_string();
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
  });
}

// Small allreduces across hosts (and over TCP) send their data behind the
// descriptor: 64 KiB of a rank's data to all its peers together. Counts on
// both sides of that bound, odd ones, every op, in and out of place.
TEST_P(Collectives, SmallAllreduceOnBothSidesOfTheDataWithDescriptorBound) {
  const int n = ranks();
  if (n == 1) return;
  const size_t bound = (64 << 10) / sizeof(float) / size_t(n - 1);
  run_ranks(topology(), n, [&](Communicator& c) {
    for (size_t count : {size_t(1), size_t(3), size_t(1021), bound - 1, bound, bound + 1}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
        for (bool in_place : {false, true}) {
          std::vector<float> send(count), recv(count, -1.0f);
          for (size_t i = 0; i < count; ++i) send[i] = value(c.rank(), i);
          float* out = in_place ? send.data() : recv.data();
          ASSERT_TRUE(c.allreduce(send.data(), out, count, DataType::kFloat32, op).is_ok());
          for (size_t i = 0; i < count; ++i) {
            const float unit = float(i % 7 + 1);
            const float want = op == ReduceOp::kSum       ? unit * float(n * (n + 1) / 2)
                               : op == ReduceOp::kAverage ? unit * float(n * (n + 1) / 2) / float(n)
                                                          : unit * float(n);
            ASSERT_FLOAT_EQ(out[i], want) << "count " << count << " op " << reduce_op_name(op) << " i " << i;
          }
        }
      }
    }
  });
}

// A rank whose data rides with its descriptor (TCP) or the first round of
// its data (shared memory) meets a rank that sends none or more (a larger
// count, another collective): every rank reports the mismatch, leaves its
// output as it was, takes the data it was sent off the stream, and the next
// op works. Over TCP 3 ranks send to every peer at once, 4 and 8 (a power
// of two) swap in log2(n) steps, where the odd rank is heard of at second
// hand; on two hosts every rank goes through its host's leader (hosts of 2
// and 1 ranks for 3).
class DataWithDescriptor : public ::testing::TestWithParam<std::tuple<Topology, int>> {
 protected:
  Topology topology() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }
};

TEST_P(DataWithDescriptor, MismatchStaysAnErrorOnEveryRankAndTheCommunicatorUsable) {
  const int n = ranks();
  run_ranks(topology(), n, [&](Communicator& c) {
    std::vector<float> buf(100000, 1.0f);
    const size_t count = c.rank() == 2 ? buf.size() : 10;
    Status s = c.allreduce(buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kSum);
    ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("rank 2 sent float32 x 100000 elements"), std::string::npos) << s.message();
    EXPECT_EQ(buf[0], 1.0f);
    s = c.rank() == 0 ? c.broadcast(buf.data(), 10, DataType::kFloat32, 0)
                      : c.allreduce(buf.data(), buf.data(), 10, DataType::kFloat32, ReduceOp::kSum);
    ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("rank 0 called broadcast"), std::string::npos) << s.message();
    EXPECT_EQ(buf[0], 1.0f);
    ASSERT_TRUE(c.allreduce(buf.data(), buf.data(), 7, DataType::kFloat32, ReduceOp::kSum).is_ok());
    EXPECT_EQ(buf[6], float(n));
  });
}

// Whatever order each rank hears the others' data in, every rank ends with
// the same bits: values whose float sum depends on the order of the
// additions, every op that has an order (min and max meet a NaN).
TEST_P(DataWithDescriptor, EveryRankGetsTheSameBits) {
  const int n = ranks();
  const size_t count = 997;
  std::vector<std::vector<float>> out(n);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    run_ranks(topology(), n, [&](Communicator& c) {
      std::vector<float> send(count);
      for (size_t i = 0; i < count; ++i) {
        const float sign = (c.rank() + i) % 2 ? -1.0f : 1.0f;
        send[i] = sign * std::ldexp(1.0f + float(i % 13) / 7.0f, int((c.rank() * 7 + i) % 41) - 20);
      }
      if (c.rank() == 1) send[5] = std::nanf("");
      out[c.rank()].assign(count, 0.0f);
      ASSERT_TRUE(c.allreduce(send.data(), out[c.rank()].data(), count, DataType::kFloat32, op).is_ok());
    });
    for (int r = 1; r < n; ++r)
      EXPECT_EQ(std::memcmp(out[r].data(), out[0].data(), count * sizeof(float)), 0)
          << "rank " << r << " differs from rank 0, op " << reduce_op_name(op);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, DataWithDescriptor,
                         ::testing::Combine(::testing::Values(Topology::kShm, Topology::kTcp, Topology::kTwoHosts),
                                            ::testing::Values(3, 4, 8)),
                         [](const auto& info) {
                           return std::string(topology_name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

INSTANTIATE_TEST_SUITE_P(Transports, BadInput, ::testing::Values(Topology::kShm, Topology::kTcp, Topology::kTwoHosts),
                         [](const auto& info) { return std::string(topology_name(info.param)); });

TEST(CommunicatorCreate, RejectsBadOptions) {
  auto store = std::make_shared<MemoryStore>();
  CommunicatorOptions o;
  o.rank = 2;
  o.size = 2;
  EXPECT_EQ(Communicator::create(store, o).status().code(), StatusCode::kInvalidArgument);
  o.rank = 0;
  o.transport = "rdma";
  auto r = Communicator::create(store, o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("auto, tcp or shm"), std::string::npos);
}

TEST(CommunicatorCreate, MissingRankTimesOutNamingIt) {
  auto store = std::make_shared<MemoryStore>();
  CommunicatorOptions o{.rank = 0, .size = 3, .host = "h", .timeout = milliseconds(300), .bind_address = "127.0.0.1"};
  auto r = Communicator::create(store, o);
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_NE(r.status().message().find("missing rank(s) 1, 2"), std::string::npos) << r.status().message();
}

TEST(CommunicatorCreate, ShmAcrossHostsIsRefused) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      CommunicatorOptions o{.rank = r, .size = 2, .host = r ? "b" : "a", .transport = "shm",
                            .timeout = milliseconds(3000), .bind_address = "127.0.0.1"};
      auto c = Communicator::create(store, o);
      EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    });
  for (auto& t : ts) t.join();
}

TEST(CommunicatorCreate, GenerationsUnderPrefixesDoNotMix) {
  auto base = std::make_shared<MemoryStore>();
  for (int gen = 0; gen < 3; ++gen) {
    std::vector<std::thread> ts;
    for (int r = 0; r < 2; ++r)
      ts.emplace_back([&, r] {
        auto store = std::make_shared<PrefixStore>("gen" + std::to_string(gen), base);
        CommunicatorOptions o{.rank = r, .size = 2, .host = "h", .bind_address = "127.0.0.1"};
        auto c = Communicator::create(store, o);
        ASSERT_TRUE(c.is_ok()) << c.status().to_string();
        int32_t x = gen + r;
        ASSERT_TRUE((*c)->allreduce(&x, &x, 1, DataType::kInt32, ReduceOp::kSum).is_ok());
        EXPECT_EQ(x, 2 * gen + 1);
      });
    for (auto& t : ts) t.join();
  }
}

TEST(SpinFromEnv, MillisecondsOrAutoAndClearErrors) {
  unsetenv("EDT_SPIN_TIME");
  EXPECT_EQ(spin_from_env().value(), std::chrono::microseconds(-1));
  setenv("EDT_SPIN_TIME", "auto", 1);
  EXPECT_EQ(spin_from_env().value(), std::chrono::microseconds(-1));
  setenv("EDT_SPIN_TIME", "0.05", 1);
  EXPECT_EQ(spin_from_env().value(), std::chrono::microseconds(50));
  setenv("EDT_SPIN_TIME", "5", 1);
  EXPECT_EQ(spin_from_env().value(), std::chrono::microseconds(5000));
  for (const char* bad : {"fast", "-1", "5ms", "1e9"}) {
    setenv("EDT_SPIN_TIME", bad, 1);
    auto r = spin_from_env();
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("EDT_SPIN_TIME='" + std::string(bad) + "'"), std::string::npos)
        << r.status().message();
  }
  unsetenv("EDT_SPIN_TIME");
}

// Process sets: {0,1} and {2,3} formed at once, then {0,2} (across hosts in
// the two-host topology) while the pairs still run; each reduces only over
// its members, and the parent communicator keeps working beside them.
TEST(Subgroup, ReducesOverItsMembersOnlyBesideTheParent) {
  for (Topology t : {Topology::kShm, Topology::kTcp, Topology::kTwoHosts}) {
    run_ranks(t, 4, [&](Communicator& c) {
      const int r = c.rank();
      const std::vector<int> pair = r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
      auto half = c.create_subgroup(pair, r < 2 ? "low" : "high");
      ASSERT_TRUE(half.is_ok()) << half.status().to_string();
      EXPECT_EQ((*half)->rank(), r % 2);
      EXPECT_EQ((*half)->size(), 2);
      std::shared_ptr<Communicator> even;
      if (r % 2 == 0) {
        auto e = c.create_subgroup({0, 2}, "even");
        ASSERT_TRUE(e.is_ok()) << e.status().to_string();
        even = *e;
        EXPECT_EQ(even->rank(), r / 2);
      }
      int32_t x = r + 1;
      ASSERT_TRUE((*half)->allreduce(&x, &x, 1, DataType::kInt32, ReduceOp::kSum).is_ok());
      EXPECT_EQ(x, r < 2 ? 1 + 2 : 3 + 4) << topology_name(t);
      if (even) {
        int32_t y = r + 1;
        ASSERT_TRUE(even->allreduce(&y, &y, 1, DataType::kInt32, ReduceOp::kSum).is_ok());
        EXPECT_EQ(y, 1 + 3) << topology_name(t);
      }
      int32_t z = 1;
      ASSERT_TRUE(c.allreduce(&z, &z, 1, DataType::kInt32, ReduceOp::kSum).is_ok());
      EXPECT_EQ(z, 4);
    });
  }
}

TEST(Subgroup, RefusesAMemberListThatCannotBeFormed) {
  run_ranks(Topology::kShm, 2, [&](Communicator& c) {
    const int other = 1 - c.rank();
    for (const std::vector<int>& bad : {std::vector<int>{other}, std::vector<int>{1, 0}, std::vector<int>{0, 0, 1},
                                        std::vector<int>{0, 1, 2}, std::vector<int>{-1, 0, 1}}) {
      auto g = c.create_subgroup(bad, "bad");
      ASSERT_FALSE(g.is_ok());
      EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << g.status().to_string();
      EXPECT_NE(g.status().message().find("subgroup ["), std::string::npos) << g.status().message();
    }
    EXPECT_EQ(c.create_subgroup({0, 1}, "").status().code(), StatusCode::kInvalidArgument);
  });
}

}  // namespace
}  // namespace edt
