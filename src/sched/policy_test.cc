// decide() on small snapshots a person can follow: one per rule of policy.h.
#include "sched/policy.h"

#include <gtest/gtest.h>

namespace edt::sched {
namespace {

Team team(std::string name, int guaranteed, int borrow_limit) {
  return {std::move(name), {{"a100", {guaranteed, borrow_limit}}}};
}

// A cluster of 1-GPU containers, min..max, holding `containers`.
Cluster cluster(std::string name, std::string team, int min, int max, int containers, int64_t arrival = 0) {
  Cluster c;
  c.name = std::move(name);
  c.team = std::move(team);
  c.gpu_model = "a100";
  c.gpus_per_container = 1;
  c.min_containers = min;
  c.max_containers = max;
  c.containers = containers;
  c.arrival = arrival;
  return c;
}

Decisions decided(const Snapshot& s) {
  Result<Decisions> d = decide(s);
  EXPECT_TRUE(d.is_ok()) << d.status().to_string();
  Status checked = check_decisions(s, d.value());
  EXPECT_TRUE(checked.is_ok()) << checked.to_string();
  return d.value();
}

TEST(SchedPolicy, AdmitsAQueuedClusterIntoFreeGpus) {
  Snapshot s{{team("ml", 8, 0)}, {cluster("a", "ml", 4, 4, 0)}, {{"a100", {8, 0}}}};
  Decision d = *decided(s).find("a");
  EXPECT_EQ(d.action, Action::kAdmit);
  EXPECT_EQ(d.containers, 4);
}

TEST(SchedPolicy, AClusterOverItsTeamsLimitWaitsWithReasonAndPlace) {
  Snapshot s{{team("ml", 2, 1)}, {cluster("a", "ml", 4, 4, 0)}, {{"a100", {8, 0}}}};
  Decision d = *decided(s).find("a");
  EXPECT_EQ(d.action, Action::kWait);
  EXPECT_EQ(d.position, 1);
  EXPECT_NE(d.reason.find("limit of 3 GPUs"), std::string::npos) << d.reason;
}

TEST(SchedPolicy, PriorityThenArrivalOrdersTheQueue) {
  Cluster early = cluster("early", "ml", 4, 4, 0, 1), late = cluster("late", "ml", 4, 4, 0, 2);
  Cluster urgent = cluster("urgent", "ml", 4, 4, 0, 3);
  urgent.priority = 1;
  Snapshot s{{team("ml", 8, 0)}, {early, late, urgent}, {{"a100", {4, 0}}}};
  Decisions d = decided(s);
  EXPECT_EQ(d.find("urgent")->action, Action::kAdmit);
  EXPECT_EQ(d.find("early")->position, 2);  // after the admitted one's place
  EXPECT_EQ(d.find("late")->position, 3);
}

TEST(SchedPolicy, ElasticClustersShareIdleGpusFairlyBetweenTeams) {
  Snapshot s{{team("ml", 2, kUnlimited), team("cv", 2, kUnlimited)},
             {cluster("a", "ml", 1, 16, 1), cluster("b", "cv", 1, 16, 1)},
             {{"a100", {10, 0}}}};
  Decisions d = decided(s);
  EXPECT_EQ(d.find("a")->containers, 6);
  EXPECT_EQ(d.find("b")->containers, 6);
}

// Least attained service first: `old` has had 10 GPU-hours (level 2 at the
// default quantum of one), `young` none.
TEST(SchedPolicy, GrowthGoesToTheClusterThatRanLeast) {
  Cluster old = cluster("old", "ml", 1, 8, 1), young = cluster("young", "ml", 1, 8, 1);
  old.service_gpu_s = 10 * 3600;
  Snapshot s{{team("ml", 8, 0)}, {old, young}, {{"a100", {3, 0}}}};
  Decisions d = decided(s);
  EXPECT_EQ(d.find("young")->containers, 4);
  EXPECT_EQ(d.find("old"), nullptr);
}

TEST(SchedPolicy, AClusterThatRanLongDrainsItsGrowthForOneThatRanLeast) {
  Cluster old = cluster("old", "ml", 2, 8, 6), young = cluster("young", "ml", 1, 4, 1);
  Cluster fixed = cluster("fixed", "ml", 2, 2, 2);
  old.service_gpu_s = fixed.service_gpu_s = 100 * 3600;
  Snapshot s{{team("ml", 9, 0)}, {old, young, fixed}, {{"a100", {0, 0}}}};
  Decisions d = decided(s);
  EXPECT_EQ(d.find("old")->action, Action::kShrink);
  EXPECT_EQ(d.find("old")->containers, 3);  // young's 3 containers' worth; never below its min
  EXPECT_EQ(d.find("old")->for_cluster, "young");
  EXPECT_EQ(d.find("fixed"), nullptr);     // not elastic: never shrunk
  EXPECT_EQ(d.find("young"), nullptr);     // grows once the drain is done
  Snapshot next = apply(s, d);
  EXPECT_TRUE(decided(next).decisions.empty());  // nothing moves while old drains
  finish_drains(next);
  EXPECT_EQ(decided(next).find("young")->containers, 4);
  // Without service levels, nothing moves.
  s.service_quantum_gpu_s = 0;
  EXPECT_TRUE(decided(s).decisions.empty());
}

// GPUs that make no whole container of the receiver would go back to
// growth, and from there to the cluster they were drained from: none move.
TEST(SchedPolicy, NothingDrainsForLessThanOneContainerOfTheReceiver) {
  Cluster old = cluster("old", "ml", 1, 3, 3), young = cluster("young", "ml", 1, 2, 1);
  old.service_gpu_s = 100 * 3600;
  young.gpus_per_container = 4;
  Snapshot s{{team("ml", 16, 0)}, {old, young}, {{"a100", {0, 0}}}};
  EXPECT_TRUE(decided(s).decisions.empty());  // 2 GPUs above old's min, none free: less than young's 4
  s.pools["a100"].free = 2;                   // 2 free and 2 drained make them
  Decisions d = decided(s);
  EXPECT_EQ(d.find("old")->containers, 1);
  EXPECT_EQ(d.find("old")->for_cluster, "young");
}

TEST(SchedPolicy, NoRebalanceWhileAnotherTeamCouldGrowOrARequestWaits) {
  Cluster old = cluster("old", "ml", 1, 8, 5), young = cluster("young", "ml", 1, 4, 1);
  old.service_gpu_s = 100 * 3600;
  Snapshot other_team{{team("ml", 4, kUnlimited), team("cv", 2, kUnlimited)},
                      {old, young, cluster("cv1", "cv", 1, 4, 2)},
                      {{"a100", {0, 0}}}};
  EXPECT_EQ(decided(other_team).find("old"), nullptr);
  Snapshot request{{team("ml", 6, 0)}, {old, young, cluster("want", "ml", 3, 3, 0)}, {{"a100", {0, 0}}}};
  Decisions d = decided(request);
  EXPECT_EQ(d.find("old")->for_cluster, "want");  // reclaimed for the request, from the longest-running
  EXPECT_EQ(d.find("young"), nullptr);
}

TEST(SchedPolicy, GrowthStaysWithinTheBorrowLimit) {
  Snapshot s{{team("ml", 2, 3)}, {cluster("a", "ml", 1, 16, 1)}, {{"a100", {10, 0}}}};
  EXPECT_EQ(decided(s).find("a")->containers, 5);
}

TEST(SchedPolicy, AGuaranteedRequestReclaimsBorrowedContainersOnly) {
  // cv borrowed 4 beyond its guarantee of 2; ml asks its 4.
  Snapshot s{{team("ml", 4, 0), team("cv", 2, kUnlimited)},
             {cluster("big", "cv", 1, 8, 6), cluster("want", "ml", 4, 4, 0)},
             {{"a100", {0, 0}}}};
  Decisions d = decided(s);
  EXPECT_EQ(d.find("big")->action, Action::kShrink);
  EXPECT_EQ(d.find("big")->containers, 2);  // its guarantee, untouched
  EXPECT_EQ(d.find("big")->for_cluster, "want");
  EXPECT_EQ(d.find("want")->action, Action::kWait);
  EXPECT_TRUE(d.find("want")->guaranteed);
  // Drained: the request starts on the next decision.
  Snapshot next = apply(s, d);
  EXPECT_EQ(decided(next).find("want")->action, Action::kWait);  // still draining
  finish_drains(next);
  EXPECT_EQ(decided(next).find("want")->action, Action::kAdmit);
}

TEST(SchedPolicy, NeverTakesATeamBelowItsGuarantee) {
  // cv holds exactly its guarantee, elastically: nothing of it is borrowed.
  Snapshot s{{team("ml", 4, 0), team("cv", 4, 0)},
             {cluster("cv1", "cv", 1, 8, 4), cluster("want", "ml", 8, 8, 0)},
             {{"a100", {4, 0}}}};
  Decisions d = decided(s);
  EXPECT_EQ(d.find("cv1"), nullptr);
  EXPECT_EQ(d.find("want")->action, Action::kWait);
  EXPECT_FALSE(d.find("want")->guaranteed);
}

TEST(SchedPolicy, ANonElasticClusterIsNeverShrunk) {
  Snapshot s{{team("ml", 4, 0), team("cv", 0, kUnlimited)},
             {cluster("fixed", "cv", 4, 4, 4), cluster("want", "ml", 4, 4, 0)},
             {{"a100", {0, 0}}}};
  Decisions d = decided(s);
  EXPECT_EQ(d.find("fixed"), nullptr);
  EXPECT_EQ(d.find("want")->action, Action::kWait);
}

TEST(SchedPolicy, AFloorBeyondItsGuaranteeOnlyTakesGpusNoGuaranteeClaims) {
  // 8 GPUs, guarantees 4 + 2: a fixed cluster of cv may borrow 2, not 3.
  Snapshot s{{team("ml", 4, 0), team("cv", 2, kUnlimited)},
             {cluster("three", "cv", 5, 5, 0, 1), cluster("two", "cv", 4, 4, 0, 2)},
             {{"a100", {8, 0}}}};
  Decisions d = decided(s);
  EXPECT_EQ(d.find("three")->action, Action::kWait);
  EXPECT_NE(d.find("three")->reason.find("other teams' guarantees"), std::string::npos);
  EXPECT_EQ(d.find("two")->action, Action::kAdmit);  // backfill
}

TEST(SchedPolicy, ARequestThatOnlyAQuotaChangeCanPlaceSaysSo) {
  // 8 GPUs, all guaranteed (4/2/2): a user in no team ("") waits, and its
  // reason names the remedy, not only the wait; with 2 GPUs outside the
  // guarantees it would only wait for them to free up.
  Snapshot s{{team("ml", 4, 0), team("cv", 2, 0), team("nlp", 2, 0), team("", 0, kUnlimited)},
             {cluster("loner", "", 1, 1, 0)},
             {{"a100", {8, 0}}}};
  Decision d = *decided(s).find("loner");
  EXPECT_EQ(d.action, Action::kWait);
  EXPECT_NE(d.reason.find("its user is in no team"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("only once an admin gives its user a team"), std::string::npos) << d.reason;
  // Guarantees 4/2: 2 GPUs outside them, held by another no-team cluster.
  s.teams = {team("ml", 4, 0), team("cv", 2, 0), team("", 0, kUnlimited)};
  s.clusters.push_back(cluster("first", "", 2, 2, 2));
  s.pools["a100"] = {6, 0};
  d = *decided(s).find("loner");
  EXPECT_EQ(d.action, Action::kWait);
  EXPECT_NE(d.reason.find("GPUs left are kept for other teams' guarantees"), std::string::npos) << d.reason;
  EXPECT_EQ(d.reason.find("admin"), std::string::npos) << d.reason;
}

TEST(SchedPolicy, ATeamsOwnGrowthYieldsToItsOwnRequest) {
  Snapshot s{{team("ml", 8, 0)}, {cluster("elastic", "ml", 2, 8, 8), cluster("want", "ml", 4, 4, 0)},
             {{"a100", {0, 0}}}};
  Decisions d = decided(s);
  EXPECT_EQ(d.find("elastic")->containers, 4);
  EXPECT_TRUE(d.find("want")->guaranteed);
}

// ml holds 4 of its 8, all there are; big (6, arrived at 1) is blocked: it
// waits for them. small (2) arrives `after` big, with a window of an hour.
Snapshot big_blocked(int64_t after) {
  Snapshot s{{team("ml", 8, kUnlimited)},
             {cluster("running", "ml", 4, 4, 4), cluster("big", "ml", 6, 6, 0, 1),
              cluster("small", "ml", 2, 2, 0, 1 + after)},
             {{"a100", {4, 0}}}};
  s.backfill_window_ms = 3'600'000;
  return s;
}

TEST(SchedPolicy, InATeamASmallRequestDoesNotPassABlockedBigOneAfterTheBackfillWindow) {
  Decisions d = decided(big_blocked(3'600'001));
  EXPECT_EQ(d.find("big")->action, Action::kWait);
  EXPECT_NE(d.find("big")->reason.find("free 2 GPUs of its guarantee"), std::string::npos) << d.find("big")->reason;
  EXPECT_EQ(d.find("small")->action, Action::kWait);
  EXPECT_NE(d.find("small")->reason.find("behind cluster big"), std::string::npos);
}

TEST(SchedPolicy, WithinTheBackfillWindowASmallRequestPassesABlockedBigOne) {
  Snapshot s = big_blocked(3'600'000);
  EXPECT_EQ(decided(s).find("small")->action, Action::kAdmit);
  s.backfill_window_ms = 0;  // strict rank order in a team
  EXPECT_EQ(decided(s).find("small")->action, Action::kWait);
}

TEST(SchedPolicy, ReservedGpusOfAGuaranteedRequestAreNotBackfilled) {
  // want needs 4, 2 are free and 2 are draining: small may not take the 2.
  Cluster small = cluster("small", "cv", 2, 2, 0, 9);
  Snapshot s{{team("ml", 4, 0), team("cv", 4, 0)}, {cluster("want", "ml", 4, 4, 0, 1), small},
             {{"a100", {2, 2}}}};
  Decisions d = decided(s);
  EXPECT_EQ(d.find("want")->action, Action::kWait);
  EXPECT_EQ(d.find("small")->action, Action::kWait);
}

TEST(SchedPolicy, DrainingContainersCountAgainstTheLimit) {
  Cluster leaving = cluster("leaving", "ml", 1, 4, 1);
  leaving.draining = 3;
  Snapshot s{{team("ml", 4, 0)}, {leaving, cluster("want", "ml", 2, 2, 0)}, {{"a100", {4, 3}}}};
  EXPECT_EQ(decided(s).find("want")->action, Action::kWait);
}

TEST(SchedPolicy, AClusterAboveItsMaxDrainsDownToIt) {
  Snapshot s{{team("ml", 8, 0)}, {cluster("a", "ml", 2, 3, 6)}, {{"a100", {0, 0}}}};
  Decision d = *decided(s).find("a");
  EXPECT_EQ(d.action, Action::kShrink);
  EXPECT_EQ(d.containers, 3);
}

TEST(SchedPolicy, ClustersWithoutGpusStartAtOnce) {
  Cluster cpu = cluster("cpu", "nobody", 2, 2, 0);
  cpu.gpus_per_container = 0;
  cpu.gpu_model = "";
  Snapshot s{{}, {cpu}, {}};
  EXPECT_EQ(decided(s).find("cpu")->action, Action::kAdmit);
}

TEST(SchedPolicy, AnUnknownTeamWaits) {
  Snapshot s{{}, {cluster("a", "ghost", 1, 1, 0)}, {{"a100", {8, 0}}}};
  EXPECT_NE(decided(s).find("a")->reason.find("no quota"), std::string::npos);
}

TEST(SchedPolicy, BadSnapshotsAreRefusedNamingTheField) {
  Snapshot s{{team("ml", 8, 0)}, {cluster("a", "ml", 3, 2, 0)}, {}};
  Result<Decisions> d = decide(s);
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().field(), "clusters[0].max_containers");
  s.clusters = {cluster("a", "ml", 1, 1, 0), cluster("a", "ml", 1, 1, 0)};
  EXPECT_NE(decide(s).status().message().find("named twice"), std::string::npos);
}

TEST(SchedPolicy, UsageCountsBorrowedAndQueuedGpus) {
  Snapshot s{{team("ml", 2, 4)}, {cluster("a", "ml", 1, 8, 5), cluster("b", "ml", 3, 3, 0)}, {{"a100", {1, 0}}}};
  std::vector<TeamUsage> rows = usage(s);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].used, 5);
  EXPECT_EQ(rows[0].floor, 1);
  EXPECT_EQ(rows[0].borrowed, 3);
  EXPECT_EQ(rows[0].limit, 6);
  EXPECT_EQ(rows[0].queued, 3);
}

}  // namespace
}  // namespace edt::sched
