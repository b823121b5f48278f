#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "edt/elastic.h"

namespace edt::elastic {
namespace {

TEST(EpochPermutation, IsAPermutationDeterminedBySeedAndEpoch) {
  auto p = epoch_permutation(1000, 7, 3);
  std::vector<uint64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(p, epoch_permutation(1000, 7, 3));
  EXPECT_NE(p, epoch_permutation(1000, 7, 4));
  EXPECT_NE(p, epoch_permutation(1000, 8, 3));
  EXPECT_TRUE(epoch_permutation(0, 1, 1).empty());
}

TEST(ElasticSampler, DealsRemainingSamplesRoundRobin) {
  ElasticSampler s({.num_samples = 10, .seed = 0, .shuffle = false});
  s.reset(1, 3);
  EXPECT_EQ(s.shard(), (std::vector<uint64_t>{1, 4, 7}));
  EXPECT_EQ(s.batch(2), (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(s.steps_left(2), 2u);  // worker 0 has 4 samples
  s.record_batch(2);
  EXPECT_EQ(s.processed_count(), 6u);
  EXPECT_FALSE(s.epoch_done());
  EXPECT_EQ(s.batch(2), (std::vector<uint64_t>{7}));  // short: worker 0 still gets 6 and 9
  s.record_batch(2);
  EXPECT_TRUE(s.epoch_done());
  EXPECT_TRUE(s.batch(2).empty());
  EXPECT_EQ(s.processed_count(), 10u);
}

TEST(ElasticSampler, ResetRepartitionsOnlyWhatIsLeft) {
  ElasticSampler s({.num_samples = 12, .seed = 0, .shuffle = false});
  s.reset(0, 2);
  s.record_batch(3);  // worker 0 did 0 2 4, worker 1 did 1 3 5
  s.reset(2, 3);
  EXPECT_EQ(s.processed_count(), 6u);
  EXPECT_EQ(s.shard(), (std::vector<uint64_t>{8, 11}));
}

TEST(ElasticSampler, SetEpochOfTheCurrentEpochKeepsItsProgress) {
  ElasticSampler s({.num_samples = 12, .seed = 0, .shuffle = false});
  s.set_epoch(1);
  s.reset(0, 2);
  s.record_batch(3);
  s.set_epoch(1);  // a loop re-entered after a reset calls it again
  s.reset(0, 3);
  EXPECT_EQ(s.processed_count(), 6u);
  EXPECT_EQ(s.shard(), (std::vector<uint64_t>{6, 9}));
  s.set_epoch(2);  // another epoch starts afresh
  EXPECT_EQ(s.processed_count(), 0u);
}

TEST(ElasticSampler, SerializeCarriesTheWholeJobsProgress) {
  ElasticSampler a({.num_samples = 100, .seed = 5});
  a.set_epoch(2);
  a.reset(0, 4);
  a.record_batch(7);
  ElasticSampler b({.num_samples = 100, .seed = 5});
  ASSERT_TRUE(b.deserialize(a.serialize()).is_ok());
  EXPECT_EQ(b.epoch(), 2u);
  EXPECT_EQ(b.processed_count(), 28u);
  b.reset(0, 1);
  const std::vector<uint64_t> shard = b.shard();
  std::set<uint64_t> left(shard.begin(), shard.end());
  EXPECT_EQ(left.size(), 72u);
  a.reset(0, 1);
  EXPECT_EQ(a.shard(), b.shard());
}

TEST(ElasticSampler, RefusesForeignOrMalformedState) {
  ElasticSampler a({.num_samples = 10, .seed = 1});
  ElasticSampler other({.num_samples = 11, .seed = 1});
  a.record_batch(1);
  const std::string before = a.serialize();
  auto status = a.deserialize(other.serialize());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("num_samples=11"), std::string::npos) << status.message();
  EXPECT_EQ(a.deserialize("garbage").code(), StatusCode::kInvalidArgument);
  std::string truncated = before.substr(0, before.size() - 1);
  EXPECT_EQ(a.deserialize(truncated).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.serialize(), before);  // unchanged by the failed calls
}

// The exactly-once property, end to end. A simulated job of workers in
// lockstep, each with its own sampler (state crosses workers only as
// serialized bytes, as it does between processes). The "model" of a worker
// counts how many times each sample was trained into it; an allreduce step
// adds every worker's batch to every worker's model. Random events: steps,
// commits, graceful scale-ups and scale-downs at commit points, failures
// between steps and in the middle of a commit (some survivors committed,
// others not). After a failure the survivors roll back to the state of the
// survivor with the most recent commit, as State does. At the end of each
// epoch the model must hold every sample exactly once.
struct SimWorker {
  ElasticSampler sampler;
  std::vector<int> model;
  std::string committed_sampler;
  std::vector<int> committed_model;
  int64_t commit_id = 0;
};

class Job {
 public:
  Job(uint64_t num_samples, uint64_t seed, uint64_t batch, std::mt19937_64& rng)
      : options_{.num_samples = num_samples, .seed = seed}, batch_(batch), rng_(rng) {}

  void add_worker() {
    SimWorker w{ElasticSampler(options_), std::vector<int>(options_.num_samples), "", {}, 0};
    w.committed_sampler = w.sampler.serialize();
    w.committed_model = w.model;
    workers_.push_back(std::move(w));
  }

  void start(int n) {
    for (int i = 0; i < n; ++i) add_worker();
    reset_all();
  }

  void step() {
    std::vector<uint64_t> trained;
    for (auto& w : workers_) {
      auto b = w.sampler.batch(batch_);
      trained.insert(trained.end(), b.begin(), b.end());
    }
    for (auto& w : workers_) {
      for (uint64_t i : trained) ++w.model[i];
      w.sampler.record_batch(batch_);
    }
  }

  // Commits on the first `reached` workers only (the others were cut off
  // by a failure in the middle of the commit).
  void commit(size_t reached) {
    for (size_t i = 0; i < reached && i < workers_.size(); ++i) {
      auto& w = workers_[i];
      w.committed_sampler = w.sampler.serialize();
      w.committed_model = w.model;
      ++w.commit_id;
    }
  }
  void commit() { commit(workers_.size()); }

  // Graceful membership change at a commit point: commit, change, newcomers
  // receive the state, everyone re-partitions.
  void resize(int add, int remove) {
    commit();
    for (int i = 0; i < remove && workers_.size() > 1; ++i)
      workers_.erase(workers_.begin() + std::uniform_int_distribution<size_t>(0, workers_.size() - 1)(rng_));
    for (int i = 0; i < add; ++i) add_worker();
    rollback_to_source();
  }

  // Worker `victim` dies; optionally in the middle of a commit.
  void fail(size_t victim, bool mid_commit, int newcomers) {
    if (mid_commit) commit(std::uniform_int_distribution<size_t>(0, workers_.size())(rng_));
    workers_.erase(workers_.begin() + victim);
    for (int i = 0; i < newcomers; ++i) add_worker();
    rollback_to_source();
  }

  bool epoch_done() const { return workers_[0].sampler.epoch_done(); }
  size_t size() const { return workers_.size(); }

  // Checks the epoch trained every sample exactly once, then starts the next.
  void finish_epoch(uint64_t epoch) {
    commit();
    for (const auto& w : workers_) {
      for (uint64_t i = 0; i < options_.num_samples; ++i)
        ASSERT_EQ(w.committed_model[i], 1) << "sample " << i << " of epoch " << epoch;
      ASSERT_EQ(w.sampler.processed_count(), options_.num_samples);
    }
    for (auto& w : workers_) {
      w.sampler.set_epoch(epoch + 1);
      w.model.assign(options_.num_samples, 0);
    }
    commit();
    reset_all();
  }

 private:
  // The survivor with the most recent commit (lowest rank on ties) is the
  // source; every worker takes its committed state.
  void rollback_to_source() {
    size_t source = 0;
    for (size_t i = 1; i < workers_.size(); ++i)
      if (workers_[i].commit_id > workers_[source].commit_id) source = i;
    const SimWorker& s = workers_[source];
    const std::string bytes = s.committed_sampler;
    const std::vector<int> model = s.committed_model;
    const int64_t id = s.commit_id;
    for (auto& w : workers_) {
      ASSERT_TRUE(w.sampler.deserialize(bytes).is_ok());
      w.model = model;
      w.committed_sampler = bytes;
      w.committed_model = model;
      w.commit_id = id;
    }
    reset_all();
  }

  void reset_all() {
    for (size_t i = 0; i < workers_.size(); ++i)
      workers_[i].sampler.reset(static_cast<int>(i), static_cast<int>(workers_.size()));
  }

  ElasticSamplerOptions options_;
  uint64_t batch_;
  std::mt19937_64& rng_;
  std::vector<SimWorker> workers_;
};

TEST(ElasticSamplerProperty, EverySampleOnceAmongCommittedWorkUnderRandomSchedules) {
  std::mt19937_64 rng(20261129);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int resets = 0, failures = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Job job(static_cast<uint64_t>(uniform(1, 300)), rng(), static_cast<uint64_t>(uniform(1, 6)), rng);
    job.start(uniform(1, 5));
    for (uint64_t epoch = 0; epoch < 3; ++epoch) {
      while (!job.epoch_done()) {
        const int event = uniform(0, 99);
        if (event < 60) {
          job.step();
        } else if (event < 75) {
          job.commit();
        } else if (event < 85) {
          job.resize(job.size() < 10 ? uniform(1, 3) : 0, 0);
          ++resets;
        } else if (event < 92) {
          job.resize(0, uniform(1, 3));
          ++resets;
        } else if (job.size() > 1) {
          job.fail(static_cast<size_t>(uniform(0, static_cast<int>(job.size()) - 1)), uniform(0, 1) == 1,
                   uniform(0, 2));
          ++failures;
        }
        ASSERT_LE(job.size(), 20u);
      }
      job.finish_epoch(epoch);
      if (HasFatalFailure()) return;
    }
  }
  // The schedules did exercise what they claim to.
  EXPECT_GT(resets, 500);
  EXPECT_GT(failures, 200);
}

}  // namespace
}  // namespace edt::elastic
