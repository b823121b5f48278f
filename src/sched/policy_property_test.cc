// decide() on random snapshots: its guarantees (policy.h) hold for every
// one. The snapshots are reached by random runs (clusters arrive, are
// scaled up, are deleted; drains finish) from fixed seeds, so a failure
// names its seed and step and reproduces. The invariants are checked twice:
// by check_decisions(), and here by sums of their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <sstream>
#include <tuple>

#include "sched/policy.h"

namespace edt::sched {
namespace {

constexpr int kSeeds = 150;
constexpr int kSteps = 80;

struct Options {
  bool uniform_sizes = false;    // one container size per model, dividing its guarantees
  double drain_finishes = 0.6;   // chance that all drains finish between two steps
  bool overcommit = true;        // guarantees may sum past the GPUs
};

// A random run: the snapshot and what makes the next events.
class RandomRun {
 public:
  RandomRun(uint64_t seed, Options options) : rng_(seed), service_rng_(~seed), options_(options) { make_teams(); }

  Snapshot snapshot;
  int64_t clock = 0;

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  // Arrivals, scale-ups and deletions before the next decision.
  void events() {
    ++clock;
    for (int n = pick(0, 2); n > 0; --n) snapshot.clusters.push_back(new_cluster());
    if (!snapshot.clusters.empty() && chance(0.25)) remove(pick(0, static_cast<int>(snapshot.clusters.size()) - 1));
    if (!snapshot.clusters.empty() && chance(0.15)) scale_up(snapshot.clusters[pick(0, snapshot.clusters.size() - 1)]);
  }

  void after(const Decisions& decisions) {
    snapshot = apply(snapshot, decisions);
    if (chance(options_.drain_finishes)) finish_drains(snapshot);
    serve();
  }

  int size_of(const std::string& model) const { return model == "a100" ? 1 : 2; }

 private:
  void make_teams() {
    for (const std::string model : {"a100", "h100"}) {
      int unit = options_.uniform_sizes ? size_of(model) : 1;
      int capacity = unit * pick(4, 32);
      snapshot.pools[model] = {capacity, 0};
      int left = capacity;
      for (int t = 0; t < 4; ++t) {
        int guaranteed = chance(0.2) ? 0 : unit * pick(0, left / unit);
        if (options_.overcommit && chance(0.1)) guaranteed = unit * pick(0, capacity / unit);  // guarantees past the GPUs
        left = std::max(0, left - guaranteed);
        int borrow = chance(0.3) ? kUnlimited : pick(0, capacity);
        teams_[t].quotas[model] = {guaranteed, borrow};
      }
    }
    for (int t = 0; t < 4; ++t) teams_[t].name = "team" + std::to_string(t);
    snapshot.teams.assign(teams_, teams_ + 3);  // team3 is unknown: it has no quota
  }

  Cluster new_cluster() {
    Cluster c;
    c.name = "c" + std::to_string(next_id_++);
    c.team = "team" + std::to_string(pick(0, 3));
    c.priority = chance(0.8) ? 0 : pick(1, 2);
    c.arrival = clock;
    c.gpu_model = chance(0.6) ? "a100" : "h100";
    c.gpus_per_container = options_.uniform_sizes ? size_of(c.gpu_model) : std::vector<int>{1, 1, 2, 4}[pick(0, 3)];
    if (chance(0.05)) c.gpus_per_container = 0, c.gpu_model = "";
    c.min_containers = pick(1, 3);
    c.max_containers = chance(0.5) ? c.min_containers : c.min_containers + pick(1, 6);
    return c;
  }

  // Up to half an hour of service per step for every running cluster, so
  // that clusters cross service levels (of the default quantum, an hour).
  // From a generator of its own: the runs are those they were without it.
  void serve() {
    for (Cluster& c : snapshot.clusters) {
      int64_t seconds = std::uniform_int_distribution<int64_t>(0, 1800)(service_rng_);
      c.service_gpu_s += int64_t{c.gpus_per_container} * c.containers * seconds;
    }
  }

  void remove(int index) {
    Cluster& c = snapshot.clusters[index];
    if (c.gpus_per_container > 0) snapshot.pools[c.gpu_model].releasing += c.gpus_per_container * c.containers;
    snapshot.clusters.erase(snapshot.clusters.begin() + index);
  }

  // Its user asks for more (a non-elastic one), or lowers its max.
  void scale_up(Cluster& c) {
    if (c.queued()) return;
    if (c.elastic()) {
      c.max_containers = std::max(c.min_containers, c.max_containers - pick(1, 3));
      return;
    }
    c.min_containers = c.max_containers = c.containers + pick(1, 2);
    c.arrival = clock;
  }

  std::mt19937_64 rng_;
  std::mt19937_64 service_rng_;
  Options options_;
  Team teams_[4];
  int next_id_ = 0;
};

std::map<std::string, const Cluster*> by_name(const Snapshot& s) {
  std::map<std::string, const Cluster*> m;
  for (const Cluster& c : s.clusters) m[c.name] = &c;
  return m;
}

// GPUs held per "team/model", draining included.
std::map<std::string, int64_t> held(const Snapshot& s) {
  std::map<std::string, int64_t> h;
  for (const Cluster& c : s.clusters)
    h[c.team + "/" + c.gpu_model] += int64_t{c.gpus_per_container} * (c.containers + c.draining);
  return h;
}

int64_t limit(const Snapshot& s, const std::string& team, const std::string& model) {
  for (const Team& t : s.teams) {
    auto q = t.quotas.find(model);
    if (t.name == team && q != t.quotas.end())
      return q->second.borrow_limit == kUnlimited ? INT64_MAX : int64_t{q->second.guaranteed} + q->second.borrow_limit;
  }
  return 0;
}

// The invariants, by this test's own sums: limits, mins, non-elastic sizes.
void expect_invariants(const Snapshot& before, const Snapshot& after, const std::string& where) {
  std::map<std::string, int64_t> was = held(before);
  for (const auto& [key, gpus] : held(after)) {
    std::string team = key.substr(0, key.find('/')), model = key.substr(key.find('/') + 1);
    if (model.empty()) continue;
    EXPECT_LE(gpus, std::max(limit(after, team, model), was[key])) << where << ": " << key << " over its limit";
  }
  auto old = by_name(before);
  for (const Cluster& c : after.clusters) {
    const Cluster& b = *old.at(c.name);
    if (!b.queued()) {
      EXPECT_GE(c.containers, std::min(c.min_containers, b.containers)) << where << ": " << c.name;
    }
    if (!c.elastic() && c.containers < b.containers) {
      EXPECT_EQ(c.containers, c.max_containers) << where << ": " << c.name << " (not elastic) shrunk";
    }
  }
  for (const auto& [model, pool] : after.pools) EXPECT_GE(pool.free, 0) << where << ": " << model;
}

// A shrink that is no reclaim for a request and no drain down to a max
// (a rebalance) takes from an elastic cluster of a higher service level of
// its receiver's team, for a receiver below its max.
void expect_rebalances_by_level(const Snapshot& s, const Decisions& d, const std::string& where) {
  auto clusters = by_name(s);
  auto level = [&](const Cluster& c) {
    int n = 0;
    for (int64_t bound = s.service_quantum_gpu_s; bound > 0 && c.service_gpu_s >= bound; bound *= 4) ++n;
    return n;
  };
  for (const Decision& x : d.decisions) {
    if (x.action != Action::kShrink || x.for_cluster.empty()) continue;
    const Cluster& donor = *clusters.at(x.cluster);
    const Cluster& receiver = *clusters.at(x.for_cluster);
    if (receiver.queued()) continue;  // a reclaim for a request
    EXPECT_EQ(donor.team, receiver.team) << where << ": " << x.cluster << " drained for another team's "
                                         << x.for_cluster;
    EXPECT_GT(level(donor), level(receiver)) << where << ": " << x.cluster << " for " << x.for_cluster;
    EXPECT_LT(receiver.containers, receiver.max_containers) << where << ": " << x.for_cluster << " is at its max";
  }
}

// Decisions as a set: the order among one action follows the snapshot's.
std::vector<std::string> canonical(const Decisions& d) {
  std::vector<std::string> out;
  for (const Decision& x : d.decisions)
    out.push_back(x.cluster + " " + action_name(x.action) + " " + std::to_string(x.containers) + " " +
                  std::to_string(x.position) + " " + x.for_cluster + " " + x.reason);
  std::sort(out.begin(), out.end());
  return out;
}

// The snapshot and decisions, for a failure's message.
std::string describe(const Snapshot& s, const Decisions& d) {
  std::ostringstream out;
  for (const Team& t : s.teams)
    for (const auto& [model, q] : t.quotas) out << "\n  team " << t.name << " " << model << " " << q.guaranteed << "+" << q.borrow_limit;
  for (const auto& [model, p] : s.pools) out << "\n  pool " << model << " free " << p.free << " releasing " << p.releasing;
  for (const Cluster& c : s.clusters)
    out << "\n  " << c.name << " " << c.team << " prio " << c.priority << " t" << c.arrival << " " << c.gpu_model << "x"
        << c.gpus_per_container << " " << c.min_containers << ".." << c.max_containers << " at " << c.containers << "+"
        << c.draining;
  for (const Decision& x : d.decisions)
    out << "\n  -> " << x.cluster << " " << action_name(x.action) << " " << x.containers << " [" << x.reason << "]";
  return out.str();
}

Decisions step(RandomRun& run, uint64_t seed, int n) {
  std::string where = "seed " + std::to_string(seed) + " step " + std::to_string(n);
  Result<Decisions> d = decide(run.snapshot);
  EXPECT_TRUE(d.is_ok()) << where << ": " << d.status().to_string();
  Status ok = check_decisions(run.snapshot, d.value());
  EXPECT_TRUE(ok.is_ok()) << where << ": " << ok.to_string() << describe(run.snapshot, d.value());
  expect_invariants(run.snapshot, apply(run.snapshot, d.value()), where);
  expect_rebalances_by_level(run.snapshot, d.value(), where);
  return d.value();
}

// Drains for a cluster that is not queued: service levels at work.
int rebalances(const Snapshot& s, const Decisions& d) {
  auto clusters = by_name(s);
  return static_cast<int>(std::count_if(d.decisions.begin(), d.decisions.end(), [&](const Decision& x) {
    return x.action == Action::kShrink && !x.for_cluster.empty() && !clusters.at(x.for_cluster)->queued();
  }));
}

TEST(SchedPolicyProperty, InvariantsHoldAlongRandomRuns) {
  int moved = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    RandomRun run(seed, {});
    for (int n = 0; n < kSteps && !HasFailure(); ++n) {
      run.events();
      Decisions d = step(run, seed, n);
      moved += rebalances(run.snapshot, d);
      run.after(d);
    }
  }
  EXPECT_GT(moved, 0) << "no growth moved between service levels: the rebalance is not exercised";
  RecordProperty("rebalances", moved);
}

TEST(SchedPolicyProperty, TheOutcomeIsDeterministicAndIgnoresTheSnapshotsOrder) {
  for (uint64_t seed = 1; seed <= kSeeds / 3; ++seed) {
    RandomRun run(seed, {});
    std::mt19937_64 shuffle(seed);
    for (int n = 0; n < kSteps / 2 && !HasFailure(); ++n) {
      run.events();
      Decisions d = step(run, seed, n);
      Snapshot shuffled = run.snapshot;
      std::shuffle(shuffled.clusters.begin(), shuffled.clusters.end(), shuffle);
      EXPECT_EQ(canonical(d), canonical(decide(run.snapshot).value())) << "seed " << seed << " step " << n;
      EXPECT_EQ(canonical(d), canonical(decide(shuffled).value())) << "seed " << seed << " step " << n;
      run.after(d);
    }
  }
}

// Whether a ranks before b (policy.h's rank).
bool ranks_before(const Cluster& a, const Cluster& b) {
  return std::tie(b.priority, a.arrival, a.name) < std::tie(a.priority, b.arrival, b.name);
}

// A guaranteed request is admitted within kBound decisions of first
// waiting as one, drains finishing between decisions, unless a request of
// its own team ranked before it queues meanwhile (a higher-priority one, or
// one it had passed within the backfill window) (policy.h). Container sizes
// divide the guarantees, and guarantees fit the GPUs (the terms on which
// policy.h promises it). With no backfill window and with one.
TEST(SchedPolicyProperty, NoGuaranteedRequestStarves) {
  constexpr int kBound = 3;
  int longest = 0, seen = 0;
  for (int64_t window : {int64_t{0}, int64_t{4}})
  for (uint64_t seed = 1; seed <= kSeeds && !HasFailure(); ++seed) {
    RandomRun run(seed, {.uniform_sizes = true, .drain_finishes = 1.0, .overcommit = false});
    std::map<std::string, int> since;  // guaranteed request -> first step it waited as one
    for (int n = 0; n < kSteps && !HasFailure(); ++n) {
      run.events();
      run.snapshot.backfill_window_ms = window;
      Decisions d = step(run, seed, n);
      auto clusters = by_name(run.snapshot);
      for (auto it = since.begin(); it != since.end();) {
        const Decision* x = d.find(it->first);
        const Cluster* c = clusters.count(it->first) ? clusters.at(it->first) : nullptr;
        bool bumped = c && std::any_of(run.snapshot.clusters.begin(), run.snapshot.clusters.end(), [&](const Cluster& o) {
          return o.team == c->team && o.gpu_model == c->gpu_model && o.queued() && ranks_before(o, *c);
        });
        if (!c || !x || x->action != Action::kWait || bumped) {
          if (c && x && x->action == Action::kAdmit) longest = std::max(longest, n - it->second), ++seen;
          it = since.erase(it);
          continue;
        }
        EXPECT_LT(n - it->second, kBound) << "window " << window << " seed " << seed << " step " << n << ": " << it->first << " starves: "
                                          << x->reason << describe(run.snapshot, d);
        ++it;
      }
      for (const Decision& x : d.decisions)
        if (x.action == Action::kWait && x.guaranteed) since.emplace(x.cluster, n);
      run.after(d);
    }
  }
  EXPECT_GT(seen, 20) << "too few guaranteed requests waited to prove anything";
  RecordProperty("longest_wait_steps", longest);
}

// The first request of a team that waits for the team's own clusters to end
// (blocked) is passed, by a request of its team ranked after it, only if that
// one arrived within the backfill window after it: finitely many.
bool blocked(const Decision& x) {
  return x.action == Action::kWait && (x.reason.find("waiting for its team's clusters to free") == 0 ||
                                       x.reason.find("within its team's guarantee, but only") == 0);
}

TEST(SchedPolicyProperty, ABlockedRequestIsPassedOnlyWithinTheBackfillWindow) {
  constexpr int64_t kWindow = 3;  // decisions of the random run's clock
  int passed = 0;
  for (uint64_t seed = 1; seed <= kSeeds && !HasFailure(); ++seed) {
    RandomRun run(seed, {});
    for (int n = 0; n < kSteps && !HasFailure(); ++n) {
      run.events();
      run.snapshot.backfill_window_ms = kWindow;
      Decisions d = step(run, seed, n);
      auto clusters = by_name(run.snapshot);
      std::map<std::pair<std::string, std::string>, const Cluster*> first;  // (team, model) -> blocked
      for (const Decision& x : d.decisions) {
        const Cluster* c = clusters.at(x.cluster);
        const Cluster*& b = first[{c->team, c->gpu_model}];
        if (blocked(x) && (!b || x.position < d.find(b->name)->position)) b = c;
      }
      for (const Decision& x : d.decisions) {
        const Cluster* c = clusters.at(x.cluster);
        auto b = first.find({c->team, c->gpu_model});
        if (x.action != Action::kAdmit || b == first.end() || !b->second) continue;
        if (c->priority > b->second->priority) continue;  // ranked before it: not a pass
        ++passed;
        EXPECT_LE(c->arrival - b->second->arrival, kWindow)
            << "seed " << seed << " step " << n << ": " << c->name << " passed " << b->second->name
            << describe(run.snapshot, d);
      }
      run.after(d);
    }
  }
  EXPECT_GT(passed, 0) << "no request passed a blocked one: the window is not exercised";
  RecordProperty("passes", passed);
}

TEST(SchedPolicyProperty, ArbitrarySnapshotsAreDecidedWithinTheRules) {
  // Not reached by the policy: counts at random, teams over their limits.
  for (uint64_t seed = 1; seed <= kSeeds && !HasFailure(); ++seed) {
    RandomRun run(seed, {});
    for (int n = 0; n < 20; ++n) run.events();
    for (Cluster& c : run.snapshot.clusters) {
      c.containers = run.pick(0, c.max_containers + 2);
      c.draining = run.chance(0.2) ? run.pick(1, 2) : 0;
    }
    for (auto& [model, pool] : run.snapshot.pools) pool = {run.pick(0, 16), run.pick(0, 8)};
    step(run, seed, 0);
  }
}

}  // namespace
}  // namespace edt::sched
