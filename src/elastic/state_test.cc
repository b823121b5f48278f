// State and run() with workers as threads: one MemoryStore, real
// communicators, the test playing the launcher through a coordinator.
//
// The training function is the shape of data-parallel training: each step
// every worker takes its batch from an ElasticSampler, the "gradient" is a
// vector with a 1 for each of its samples, an allreduce sums it, and every
// worker adds the sum to its model. At the end of the epoch the model of
// every worker must count every sample exactly once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>

#include "edt/elastic.h"
#include "elastic/membership.h"

namespace edt::elastic {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kSamples = 1200;
constexpr uint64_t kBatch = 3;
constexpr int kCommitEvery = 4;
constexpr const char* kHost = "127.0.0.1";  // an address: a made-up name would go to DNS, which may take seconds

struct Model final : StateObject {
  std::vector<int64_t> counts = std::vector<int64_t>(kSamples);
  int64_t steps = 0;
  // keeps_commit: the model keeps its commit itself (StateObject::commit),
  // a copy of counts and steps; serialized counts serialize()'s calls.
  bool keeps_commit = false;
  std::vector<int64_t> committed_counts;
  int64_t committed_steps = 0;
  mutable int serialized = 0;
  // lends_views, with keeps_commit: committed_views() lends the commit in
  // place, steps and counts as two pieces; committed_bytes() is then never
  // needed (copies counts its calls).
  bool lends_views = false;
  mutable int copies = 0;
  // What deserialize_shared() gave, kept as an object that reads a
  // received state in place keeps it.
  std::shared_ptr<const void> received_owner;
  std::string_view received;

  bool commit() override {
    if (!keeps_commit) return false;
    committed_counts = counts;
    committed_steps = steps;
    return true;
  }
  Status restore() override {
    counts = committed_counts;
    steps = committed_steps;
    return Status::ok();
  }
  std::string committed_bytes() const override {
    ++copies;
    Model copy;
    copy.counts = committed_counts;
    copy.steps = committed_steps;
    return copy.serialize();
  }

  std::vector<std::string_view> committed_views() const override {
    if (!lends_views) return {};
    return {{reinterpret_cast<const char*>(&committed_steps), sizeof committed_steps},
            {reinterpret_cast<const char*>(committed_counts.data()), committed_counts.size() * sizeof(int64_t)}};
  }
  Status deserialize_shared(const std::shared_ptr<const void>& owner, std::string_view bytes) override {
    received_owner = owner;
    received = bytes;
    return deserialize(bytes);
  }

  std::string serialize() const override {
    ++serialized;
    std::string out(sizeof steps + counts.size() * sizeof(int64_t), '\0');
    std::memcpy(out.data(), &steps, sizeof steps);
    std::memcpy(out.data() + sizeof steps, counts.data(), counts.size() * sizeof(int64_t));
    return out;
  }
  Status deserialize(std::string_view bytes) override {
    if (bytes.size() != sizeof steps + counts.size() * sizeof(int64_t)) return invalid_argument("model size");
    std::memcpy(&steps, bytes.data(), sizeof steps);
    std::memcpy(counts.data(), bytes.data() + sizeof steps, counts.size() * sizeof(int64_t));
    return Status::ok();
  }
};

struct WorkerResult {
  Status status;
  std::vector<int64_t> counts;
  int resets = 0;
  std::vector<int> sizes;  // size at each reset
  Placement first;         // placement() before run()
  int64_t steps = 0;       // steps the model went through
  int serialized = 0;      // calls of the model's serialize()
  int copies = 0;          // calls of the model's committed_bytes()
  std::string received;    // the state it received last, read after run() from where it arrived
  std::vector<TransferStats> transfers;  // at each reset
};

class ElasticJob {
 public:
  explicit ElasticJob(CoordinatorOptions options = {}) : coordinator_(store_, options) {
    poller_ = std::thread([this] {
      while (!stop_) {
        {
          std::lock_guard lock(mu_);
          auto out = coordinator_.poll();
          EXPECT_TRUE(out.is_ok()) << out.status().to_string();
        }
        std::this_thread::sleep_for(2ms);
      }
    });
  }
  ~ElasticJob() {
    stop_ = true;
    poller_.join();
  }

  struct Start {
    std::string id;
    int slot = 0;
    int64_t die_at_step = -1;  // >= 0: it dies (aborts its communicator and disappears) at that step
  };

  // Starts workers that the coordinator expects together: their first
  // generation has all of them, whichever thread registers first.
  std::vector<std::future<WorkerResult>> start(const std::vector<Start>& workers) {
    std::lock_guard lock(mu_);
    for (const auto& w : workers) coordinator_.expect(w.id, kHost, 0, w.slot);
    std::vector<std::future<WorkerResult>> started;
    for (const auto& w : workers)
      started.push_back(std::async(std::launch::async, [=, this] { return work(w.id, w.die_at_step); }));
    return started;
  }
  std::future<WorkerResult> start(const std::string& id, int slot) { return std::move(start({{id, slot}})[0]); }

  void lost(const std::string& id) {
    std::lock_guard lock(mu_);
    coordinator_.lost(id, "died");
  }
  void remove(const std::string& id) {
    std::lock_guard lock(mu_);
    coordinator_.remove(id, "host removed");
  }

  std::atomic<int64_t> max_step{0};
  int commit_every = kCommitEvery;
  bool check_every_step = false;  // check_host_updates() at the steps without a commit
  bool keeps_commit = false;      // Model::keeps_commit
  bool lends_views = false;       // Model::lends_views

 private:
  WorkerResult work(const std::string& id, int64_t die_at_step) {
    WorkerResult result;
    auto state = State::create({.store = store_,
                                .watch_store = store_,
                                .worker_id = id,
                                .host = kHost,
                                .transport = "tcp",
                                .collective_timeout = 5000ms,
                                .elastic_timeout = 10000ms,
                                .heartbeat_interval = 50ms});
    if (!state.is_ok()) {
      result.status = state.status();
      return result;
    }
    Model model;
    model.keeps_commit = keeps_commit;
    model.lends_views = lends_views;
    ElasticSampler sampler({.num_samples = kSamples, .seed = 42});
    state.value()->add("model", &model);
    state.value()->add("sampler", &sampler);
    state.value()->on_reset([&] {
      result.sizes.push_back(state.value()->size());
      result.transfers.push_back(state.value()->last_transfer());
    });
    auto first = state.value()->placement();
    if (!first.is_ok()) {
      result.status = first.status();
      return result;
    }
    result.first = first.value();
    result.status = run(*state.value(), [&](State& s) -> Status {
      while (!sampler.epoch_done()) {
        if (model.steps == die_at_step) {
          s.comm().abort();
          return internal_error("simulated death");
        }
        std::vector<int64_t> grad(kSamples);
        for (uint64_t i : sampler.batch(kBatch)) ++grad[i];
        EDT_RETURN_IF_ERROR(s.comm().allreduce(grad.data(), grad.data(), kSamples, DataType::kInt64, ReduceOp::kSum));
        for (uint64_t i = 0; i < kSamples; ++i) model.counts[i] += grad[i];
        sampler.record_batch(kBatch);
        ++model.steps;
        int64_t seen = max_step.load();
        while (seen < model.steps && !max_step.compare_exchange_weak(seen, model.steps)) {
        }
        std::this_thread::sleep_for(1ms);
        if (model.steps % commit_every == 0) {
          EDT_RETURN_IF_ERROR(s.commit());
        } else if (check_every_step) {
          EDT_RETURN_IF_ERROR(s.check_host_updates());
        }
      }
      return Status::ok();
    });
    if (die_at_step >= 0 && result.status.code() == StatusCode::kInternal) lost(id);
    result.counts = model.counts;
    result.steps = model.steps;
    result.serialized = model.serialized;
    result.copies = model.copies;
    result.received = std::string(model.received);  // still mapped: the model holds its owner
    result.resets = state.value()->resets();
    return result;
  }

  std::shared_ptr<Store> store_ = std::make_shared<MemoryStore>();
  std::mutex mu_;
  MembershipCoordinator coordinator_;  // guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread poller_;
};

void wait_for_step(ElasticJob& job, int64_t step) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (job.max_step.load() < step && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_GE(job.max_step.load(), step);
}

void expect_exactly_once(const WorkerResult& r) {
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  for (uint64_t i = 0; i < kSamples; ++i) ASSERT_EQ(r.counts[i], 1) << "sample " << i;
}

// a and b train; c joins once they are 20 steps in. Their results, each
// checked to have trained every sample exactly once.
std::vector<WorkerResult> grow_two_to_three(ElasticJob& job) {
  auto ab = job.start({{"a", 0}, {"b", 1}});
  wait_for_step(job, 20);
  auto c = job.start("c", 2);
  std::vector<WorkerResult> out;
  out.push_back(ab[0].get());
  out.push_back(ab[1].get());
  out.push_back(c.get());
  for (const auto& r : out) expect_exactly_once(r);
  return out;
}

TEST(ElasticState, GrowsFromTwoToThreeWithoutRestartingTheTwo) {
  ElasticJob job;
  auto r = grow_two_to_three(job);
  EXPECT_EQ(r[0].sizes, (std::vector<int>{2, 3}));  // the same thread, same memory: one reset
  EXPECT_EQ(r[0].resets, 1);
  EXPECT_EQ(r[2].sizes, (std::vector<int>{3}));
}

// The joiner's state comes from both survivors, a disjoint half from each;
// the survivors receive nothing.
TEST(ElasticState, AJoinersStateComesFromEverySurvivor) {
  for (bool keeps_commit : {false, true}) {
    ElasticJob job;
    job.keeps_commit = keeps_commit;
    auto r = grow_two_to_three(job);
    ASSERT_EQ(r[2].transfers.size(), 1u);
    const TransferStats& joined = r[2].transfers[0];
    ASSERT_EQ(joined.bytes_from_rank.size(), 3u);
    EXPECT_GT(joined.bytes, 0);
    EXPECT_EQ(joined.bytes_from_rank[0] + joined.bytes_from_rank[1], joined.bytes);
    EXPECT_LE(std::abs(joined.bytes_from_rank[0] - joined.bytes_from_rank[1]), 1);
    EXPECT_EQ(joined.bytes_from_rank[2], 0);
    for (int survivor : {0, 1}) {
      const TransferStats& sent = r[survivor].transfers.back();
      EXPECT_TRUE(sent.bytes_from_rank.empty());
      EXPECT_EQ(sent.bytes_sent, joined.bytes_from_rank[survivor]);
    }
  }
}

TEST(ElasticState, GrowsAtACheckWithoutACommitFromThatStep) {
  ElasticJob job;
  job.commit_every = 1 << 20;  // never: the only way to grow is check_host_updates()
  job.check_every_step = true;
  auto r = grow_two_to_three(job);
  EXPECT_EQ(r[0].sizes, (std::vector<int>{2, 3}));
  EXPECT_EQ(r[1].steps, r[0].steps);  // no rank went back to an older step
}

TEST(ElasticState, SurvivesAWorkerDyingAndRollsBack) {
  ElasticJob job;
  auto abc = job.start({{"a", 0}, {"b", 1}, {"c", 2, /*die_at_step=*/30}});
  auto &a = abc[0], &b = abc[1], &c = abc[2];
  auto rc = c.get();
  EXPECT_EQ(rc.status.code(), StatusCode::kInternal);
  auto ra = a.get(), rb = b.get();
  expect_exactly_once(ra);
  expect_exactly_once(rb);
  EXPECT_EQ(ra.sizes, (std::vector<int>{3, 2}));
}

// An object that keeps its commit itself is committed, restored after a
// failure and sent to a joiner without serialize(): its commit is a copy.
TEST(ElasticState, AnObjectThatKeepsItsCommitIsNeverSerialized) {
  ElasticJob grown;
  grown.keeps_commit = true;
  for (const auto& r : grow_two_to_three(grown)) EXPECT_EQ(r.serialized, 0);
  ElasticJob failed;
  failed.keeps_commit = true;
  auto abc = failed.start({{"a", 0}, {"b", 1}, {"c", 2, /*die_at_step=*/30}});
  EXPECT_EQ(abc[2].get().status.code(), StatusCode::kInternal);
  for (auto* f : {&abc[0], &abc[1]}) {
    auto r = f->get();
    expect_exactly_once(r);
    EXPECT_EQ(r.sizes, (std::vector<int>{3, 2}));
    EXPECT_EQ(r.serialized, 0);
  }
}

// An object that lends its commit in several pieces sends them as one
// state, by slices (a joiner) and by the broadcast of a job's start, and
// never copies it; a receiver may keep reading what arrived.
TEST(ElasticState, AnObjectLendsItsCommitInPiecesAndReadsWhatArrivedInPlace) {
  ElasticJob grown;
  grown.keeps_commit = grown.lends_views = true;
  auto r = grow_two_to_three(grown);
  for (const auto& w : r) EXPECT_EQ(w.serialized + w.copies, 0);
  EXPECT_EQ(r[2].received.size(), sizeof(int64_t) * (kSamples + 1));
  ElasticJob started;
  started.keeps_commit = started.lends_views = true;
  auto abc = started.start({{"a", 0}, {"b", 1}, {"c", 2}});
  for (auto& f : abc) {
    auto w = f.get();
    expect_exactly_once(w);
    EXPECT_EQ(w.serialized + w.copies, 0);
  }
}

TEST(ElasticState, ShrinksWhenAWorkerIsRemoved) {
  ElasticJob job;
  auto abc = job.start({{"a", 0}, {"b", 1}, {"c", 2}});
  auto &a = abc[0], &b = abc[1], &c = abc[2];
  wait_for_step(job, 20);
  job.remove("b");
  auto rb = b.get();
  EXPECT_TRUE(left_the_job(rb.status)) << rb.status.to_string();
  auto ra = a.get(), rc = c.get();
  expect_exactly_once(ra);
  expect_exactly_once(rc);
  EXPECT_EQ(rc.sizes, (std::vector<int>{3, 2}));
}

TEST(ElasticState, PlacementBeforeRunIsTheFirstGeneration) {
  ElasticJob job;
  auto ab = job.start({{"a", 0}, {"b", 1}});
  auto ra = ab[0].get(), rb = ab[1].get();
  expect_exactly_once(ra);
  EXPECT_EQ(ra.first.rank, 0);
  EXPECT_EQ(rb.first.rank, 1);
  EXPECT_EQ(rb.first.hosts, (std::vector<std::string>{kHost, kHost}));
  EXPECT_EQ(rb.first.generation, 1);
}

TEST(ElasticState, AWorkerArrivingAfterTheWorkIsDoneDoesNotTrainAgain) {
  ElasticJob job;
  auto ab = job.start({{"a", 0}, {"b", 1}});
  auto ra = ab[0].get(), rb = ab[1].get();
  expect_exactly_once(ra);
  // The work is complete: a late worker ends cleanly, with its model untouched.
  auto late = job.start("c", 2).get();
  EXPECT_TRUE(left_the_job(late.status)) << late.status.to_string();
  EXPECT_NE(late.status.message().find("the job finished its work"), std::string::npos) << late.status.to_string();
  EXPECT_EQ(late.steps, 0);
}

TEST(ElasticState, LeftTheJobMeansRemovalOnly) {
  EXPECT_FALSE(left_the_job(Status(StatusCode::kHostsUpdated, "membership changed")));
  EXPECT_FALSE(left_the_job(aborted("the job is shutting down: reset limit")));
  EXPECT_TRUE(left_the_job(aborted("worker a left the job: host removed")));
}

TEST(ElasticState, FromEnvNamesWhatIsMissing) {
  unsetenv("EDT_COORDINATOR");
  auto r = State::from_env();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("EDT_COORDINATOR"), std::string::npos);
}

}  // namespace
}  // namespace edt::elastic
