#include "control/service/service.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "control/allocation/schedule.h"
#include "control/service/tokens.h"

namespace edt::control {
namespace {

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("edt-service-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    db_ = Database::open((dir_ / "edtd.db").string()).value();
    ServiceOptions options{AddressRange::parse("127.90.0.0/29").value(), dir_.string(),
                           [this](const std::string& c) { requested_.push_back(c); }};
    service_ = std::make_unique<Service>(db_.get(), options);
    std::vector<Gpu> gpus;
    for (int i = 0; i < 4; ++i) gpus.push_back({i, "NVIDIA-P4", true, ""});
    ASSERT_TRUE(service_->set_inventory({"edt", "/", {"horovod"}, true}, gpus).is_ok());
    auto token = service_->ensure_admin();
    ASSERT_TRUE(token.is_ok() && token->has_value());
    admin_ = *service_->authenticate(**token);
    ASSERT_TRUE(service_->create_user(admin_, "alice").is_ok());
    bob_token_ = service_->create_user(admin_, "bob")->token;
  }
  void TearDown() override {
    service_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  ClusterSpec spec(const std::string& name, int containers, int gpus = 0) {
    ClusterSpec s;
    s.name = name;
    s.framework = "horovod";
    s.containers = containers;
    if (gpus) s.gpu = {"NVIDIA-P4", gpus};
    return s;
  }
  int free_gpus() { return db_->lock().catalog(std::nullopt).gpus_free["NVIDIA-P4"]; }
  std::vector<std::string> event_types(const std::string& cluster) {
    std::vector<std::string> out;
    for (const auto& e : db_->lock().events(cluster)) out.push_back(to_string(e.type));
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<Service> service_;
  std::vector<std::string> requested_;
  User admin_;
  User alice_{"alice", false};
  User bob_{"bob", false};
  std::string bob_token_;
};

TEST_F(ServiceTest, CreateAllotsRecordsItsEventAndRequestsAReconcile) {
  auto c = service_->create_cluster(alice_, spec("a", 2, 1));
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->containers.size(), 2u);
  EXPECT_EQ(c->containers[0].name, "a-launcher");
  EXPECT_EQ(c->containers[1].name, "a-worker-0");
  EXPECT_EQ(c->containers[0].address, "127.90.0.1");
  EXPECT_EQ(c->containers[1].address, "127.90.0.2");
  EXPECT_EQ(c->containers[0].gpus, std::vector<int>{0});
  EXPECT_EQ(c->containers[1].gpus, std::vector<int>{1});
  EXPECT_EQ(c->owner, "alice");
  // GPUs go through the scheduler, which placed it at once.
  EXPECT_EQ(c->phase, Phase::kCreating);
  EXPECT_FALSE(c->queued.waiting());
  EXPECT_EQ(free_gpus(), 2);
  EXPECT_EQ(event_types("a"), (std::vector<std::string>{"Created"}));
  EXPECT_EQ(requested_, (std::vector<std::string>{"a", kScheduleKey}));
}

TEST_F(ServiceTest, WhatCannotBePlacedNowWaitsInTheQueueAndCanBeCancelled) {
  ASSERT_TRUE(service_->create_cluster(alice_, spec("a", 2, 1)).is_ok());
  auto b = service_->create_cluster(bob_, spec("b", 3, 1));
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(b->phase, Phase::kPending);
  EXPECT_TRUE(b->containers.empty());
  EXPECT_EQ(b->queued.containers, 3);
  EXPECT_EQ(b->queued.position, 1) << b->queued.reason;
  EXPECT_FALSE(b->queued.reason.empty());
  // A smaller request behind it fits the 2 free GPUs (b reserves none: it
  // is not within a guarantee), so it is placed.
  auto c = service_->create_cluster(bob_, spec("c", 2, 1));
  ASSERT_TRUE(c.is_ok());
  EXPECT_FALSE(c->queued.waiting());
  EXPECT_EQ(event_types("b"), (std::vector<std::string>{"Created", "Queued"}));
  EXPECT_EQ(free_gpus(), 0);
  // A scale that cannot be placed waits too, the cluster keeping its size,
  // and a new scale withdraws it.
  auto more = service_->scale_cluster(alice_, "a", 3);
  ASSERT_TRUE(more.is_ok()) << more.status().message();
  EXPECT_EQ(more->spec.containers, 2);
  EXPECT_EQ(more->queued.containers, 3);
  EXPECT_EQ(more->containers.size(), 2u);
  auto withdrawn = service_->scale_cluster(alice_, "a", 2);
  ASSERT_TRUE(withdrawn.is_ok()) << withdrawn.status().field() << ": " << withdrawn.status().message();
  EXPECT_FALSE(db_->lock().cluster("a")->queued.waiting());
  // More than the machine has at all is refused, not queued.
  auto never = service_->create_cluster(bob_, spec("d", 5, 1));
  ASSERT_FALSE(never.is_ok());
  EXPECT_EQ(never.status().field(), "gpu.count");
  EXPECT_FALSE(db_->lock().cluster("d"));
  // Cancel: the queued cluster is deleted without ever holding a GPU.
  ASSERT_TRUE(service_->delete_cluster(bob_, "b").is_ok());
  EXPECT_FALSE(db_->lock().cluster("b")->queued.waiting());
}

TEST_F(ServiceTest, RefusalsChangeNothing) {
  ASSERT_TRUE(service_->create_cluster(alice_, spec("a", 2, 1)).is_ok());
  requested_.clear();
  auto taken = service_->create_cluster(alice_, spec("a", 2));
  ASSERT_FALSE(taken.is_ok());
  EXPECT_EQ(taken.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(taken.status().field(), "name");
  auto gpus = service_->create_cluster(alice_, spec("b", 3, 2));
  ASSERT_FALSE(gpus.is_ok());
  EXPECT_EQ(gpus.status().field(), "gpu.count");
  EXPECT_NE(gpus.status().message().find("this machine has 4"), std::string::npos) << gpus.status().message();
  // The /29 has addresses .1 to .6: 2 taken, 4 free; 5 more do not fit.
  auto addresses = service_->create_cluster(alice_, spec("c", 5));
  ASSERT_FALSE(addresses.is_ok());
  EXPECT_EQ(addresses.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(db_->lock().cluster_names(), std::vector<std::string>{"a"});
  EXPECT_TRUE(db_->lock().containers("c").empty());
  EXPECT_TRUE(db_->lock().events("c").empty());
  EXPECT_EQ(free_gpus(), 2);
  EXPECT_TRUE(requested_.empty());
}

TEST_F(ServiceTest, ScaleUpAllotsAndScaleDownMarksTheHighestWorkers) {
  ASSERT_TRUE(service_->create_cluster(alice_, spec("a", 2, 1)).is_ok());
  auto up = service_->scale_cluster(alice_, "a", 4);
  ASSERT_TRUE(up.is_ok()) << up.status().field() << ": " << up.status().message();
  EXPECT_EQ(up->phase, Phase::kScaling);
  EXPECT_EQ(up->spec.containers, 4);
  EXPECT_EQ(up->containers[3].name, "a-worker-2");
  EXPECT_EQ(free_gpus(), 0);
  // More GPUs than the machine has is refused, not queued.
  auto more = service_->scale_cluster(alice_, "a", 5);
  ASSERT_FALSE(more.is_ok());
  EXPECT_EQ(more.status().field(), "gpu.count");

  ASSERT_TRUE(service_->scale_cluster(alice_, "a", 2).is_ok());
  auto records = db_->lock().containers("a");
  ASSERT_EQ(records.size(), 4u);
  EXPECT_FALSE(records[1].status.leaving);
  EXPECT_TRUE(records[2].status.leaving);
  EXPECT_TRUE(records[3].status.leaving);
  // Growing back before they are gone is refused, not mixed up.
  auto early = service_->scale_cluster(alice_, "a", 3);
  ASSERT_FALSE(early.is_ok());
  EXPECT_EQ(early.status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(db_->lock().delete_container("a-worker-1").is_ok());
  ASSERT_TRUE(db_->lock().delete_container("a-worker-2").is_ok());
  EXPECT_EQ(free_gpus(), 2);
  EXPECT_TRUE(service_->scale_cluster(alice_, "a", 3).is_ok());
  EXPECT_EQ(event_types("a"), (std::vector<std::string>{"Created", "Scaling", "Scaling", "Scaling"}));
}

// Teams ml (alice) and cv (bob), each guaranteed 2 of the 4 GPUs and
// allowed to borrow 2 more.
void make_teams(Service& service, const User& admin) {
  for (const std::string team : {"ml", "cv"}) {
    ASSERT_TRUE(service.create_team(admin, team).is_ok());
    ASSERT_TRUE(service.set_quota(admin, {team, "NVIDIA-P4", 2, 2}).is_ok());
  }
  ASSERT_TRUE(service.set_user_team(admin, "alice", "ml").is_ok());
  ASSERT_TRUE(service.set_user_team(admin, "bob", "cv").is_ok());
}

TEST_F(ServiceTest, TeamsAndQuotasAreTheAdminsAndEachUserSeesTheirOwn) {
  make_teams(*service_, admin_);
  EXPECT_EQ(service_->create_team(alice_, "x").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->set_quota(alice_, {"ml", "NVIDIA-P4", 4, 0}).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->create_team(admin_, "ml").status().code(), StatusCode::kFailedPrecondition);
  auto unknown = service_->set_user_team(admin_, "alice", "nope");
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().field(), "team");
  auto model = service_->set_quota(admin_, {"ml", "H100", 1, 0});
  EXPECT_EQ(model.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(model.status().field(), "model");
  EXPECT_EQ(service_->set_quota(admin_, {"nope", "NVIDIA-P4", 1, 0}).status().code(), StatusCode::kNotFound);
  const User alice{"alice", false, "ml"};
  auto mine = service_->teams(alice);
  ASSERT_TRUE(mine.is_ok());
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].name, "ml");
  EXPECT_EQ((*mine)[0].members, std::vector<std::string>{"alice"});
  EXPECT_EQ(service_->team(alice, "cv").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(service_->create_cluster(alice, spec("a", 2, 1)).is_ok());
  auto usage = service_->team(alice, "ml");
  ASSERT_TRUE(usage.is_ok());
  ASSERT_EQ(usage->quotas.size(), 1u);
  EXPECT_EQ(usage->quotas[0].in_use, 2);
  EXPECT_EQ(usage->quotas[0].borrowed(), 0);
}

TEST_F(ServiceTest, AnElasticClusterBorrowsIdleGpusAndGivesBackOnlyWhatItBorrowed) {
  make_teams(*service_, admin_);
  const User alice{"alice", false, "ml"}, bob{"bob", false, "cv"};
  ClusterSpec elastic = spec("e", 2, 1);
  elastic.elastic = {2, 4};
  auto e = service_->create_cluster(alice, elastic);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  // Placed at its min and grown into the 2 GPUs no one uses (ml borrows 2).
  EXPECT_EQ(e->spec.containers, 4);
  EXPECT_EQ(free_gpus(), 0);
  EXPECT_EQ(service_->scale_cluster(alice, "e", 3).status().code(), StatusCode::kFailedPrecondition);
  // cv asks within its guarantee: e's borrowed containers drain for it.
  auto f = service_->create_cluster(bob, spec("f", 2, 1));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_TRUE(f->queued.waiting());
  auto records = db_->lock().containers("e");
  ASSERT_EQ(records.size(), 4u);
  EXPECT_FALSE(records[1].status.leaving);  // the guaranteed part stays
  EXPECT_TRUE(records[2].status.leaving);
  EXPECT_TRUE(records[3].status.leaving);
  EXPECT_EQ(db_->lock().cluster("e")->spec.containers, 2);
  // Once they have drained and gone, the next scheduler step places f.
  ASSERT_TRUE(db_->lock().delete_container("e-worker-1").is_ok());
  ASSERT_TRUE(db_->lock().delete_container("e-worker-2").is_ok());
  std::vector<std::string> changed;
  {
    auto tx = db_->transaction();
    ASSERT_TRUE(schedule(tx, AddressRange::parse("127.90.0.0/29").value(), 0, &changed).is_ok());
    ASSERT_TRUE(tx.commit().is_ok());
  }
  EXPECT_EQ(changed, std::vector<std::string>{"f"});
  auto placed = db_->lock().cluster("f");
  EXPECT_FALSE(placed->queued.waiting());
  EXPECT_EQ(placed->containers.size(), 2u);
  EXPECT_EQ(free_gpus(), 0);
  auto ml = service_->team(admin_, "ml");
  EXPECT_EQ(ml->quotas[0].in_use, 2);
  EXPECT_EQ(ml->quotas[0].borrowed(), 0);
}

// Containers still draining hold their GPUs: they count against their
// team's limit until they are gone, so the team cannot take more meanwhile.
TEST_F(ServiceTest, DrainingContainersCountAgainstTheirTeamsLimit) {
  std::vector<Gpu> gpus;
  for (int i = 0; i < 8; ++i) gpus.push_back({i, "NVIDIA-P4", true, ""});
  ASSERT_TRUE(service_->set_inventory({"edt", "/", {"horovod"}, true}, gpus).is_ok());
  ASSERT_TRUE(service_->create_team(admin_, "ml").is_ok());
  ASSERT_TRUE(service_->set_quota(admin_, {"ml", "NVIDIA-P4", 4, 0}).is_ok());
  ASSERT_TRUE(service_->set_user_team(admin_, "alice", "ml").is_ok());
  const User alice{"alice", false, "ml"};
  ASSERT_TRUE(service_->create_cluster(alice, spec("a", 3, 1)).is_ok());
  ASSERT_TRUE(service_->scale_cluster(alice, "a", 2).is_ok());  // a-worker-1 drains, holding its GPU
  // ml holds 2 + 1 draining of its 4: 2 more would be 5 GPUs at once.
  auto b = service_->create_cluster(alice, spec("b", 2, 1));
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_TRUE(b->queued.waiting());
  EXPECT_TRUE(b->containers.empty());
  ASSERT_TRUE(db_->lock().delete_container("a-worker-1").is_ok());
  std::vector<std::string> changed;
  {
    auto tx = db_->transaction();
    ASSERT_TRUE(schedule(tx, AddressRange::parse("127.90.0.0/29").value(), 0, &changed).is_ok());
    ASSERT_TRUE(tx.commit().is_ok());
  }
  EXPECT_EQ(changed, std::vector<std::string>{"b"});
  EXPECT_EQ(service_->team(admin_, "ml")->quotas[0].in_use, 4);
}

TEST_F(ServiceTest, OwnersAndTheAdmin) {
  ASSERT_TRUE(service_->create_cluster(alice_, spec("a", 2)).is_ok());
  // Another user's cluster is answered for in the words of a missing one.
  const Status missing = service_->cluster(alice_, "none").status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  for (const Status& e : {service_->cluster(bob_, "a").status(), service_->scale_cluster(bob_, "a", 3).status(),
                         service_->delete_cluster(bob_, "a").status(), service_->events(bob_, "a").status(),
                         service_->containers(bob_, "a").status()}) {
    EXPECT_EQ(e.code(), StatusCode::kNotFound);
    EXPECT_EQ(e.message(), "cluster 'a' does not exist");
    EXPECT_EQ(e.fix(), missing.fix());
  }
  // A create finds the name taken, and names no owner.
  auto taken = service_->create_cluster(bob_, spec("a", 2));
  EXPECT_EQ(taken.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(taken.status().message().find("alice"), std::string::npos) << taken.status().message();
  EXPECT_TRUE(service_->clusters(bob_).empty());
  EXPECT_EQ(service_->clusters(admin_).size(), 1u);
  EXPECT_EQ(service_->create_user(alice_, "eve").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->users(alice_).status().message(), "only the admin may list users");
  EXPECT_EQ(service_->create_user(admin_, "alice").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(service_->create_token(alice_, "admin").status().code(), StatusCode::kPermissionDenied);
  auto token = service_->create_token(alice_, "alice");
  ASSERT_TRUE(token.is_ok());
  EXPECT_EQ(service_->authenticate(token->token)->name, "alice");
  EXPECT_FALSE(service_->authenticate("edt_wrong").has_value());
  EXPECT_EQ(service_->register_image(alice_, {"ds", "/", {"deepspeed"}, false}).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->register_image(admin_, {"edt", "/", {"deepspeed"}, false}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(service_->register_image(admin_, {"ds", "/nonexistent", {"deepspeed"}, false}).status().field(), "root");
}

TEST_F(ServiceTest, DeleteMarksEverythingLeavingWithItsEvent) {
  ASSERT_TRUE(service_->create_cluster(alice_, spec("a", 2)).is_ok());
  auto deleted = service_->delete_cluster(alice_, "a");
  ASSERT_TRUE(deleted.is_ok());
  EXPECT_EQ(deleted->phase, Phase::kDeleting);
  for (const auto& c : deleted->containers) EXPECT_TRUE(c.leaving);
  EXPECT_EQ(event_types("a"), (std::vector<std::string>{"Created", "Deleting"}));
  EXPECT_EQ(service_->scale_cluster(alice_, "a", 3).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ServiceTest, VolumesMountedByAClusterStay) {
  auto volume = service_->create_volume(alice_, {"data", false, ""});
  ASSERT_TRUE(volume.is_ok());
  EXPECT_TRUE(std::filesystem::is_directory(volume->host_path));
  EXPECT_EQ(service_->create_volume(bob_, {"data", false, ""}).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(service_->create_volume(bob_, {"mine", true, "/tmp"}).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->create_volume(admin_, {"mine", true, "relative"}).status().code(), StatusCode::kInvalidArgument);
  ClusterSpec s = spec("a", 2);
  s.mounts.push_back({"data", "/root/data", false});
  EXPECT_EQ(service_->create_cluster(bob_, s).status().field(), "mounts[0].volume");
  ASSERT_TRUE(service_->create_cluster(alice_, s).is_ok());
  EXPECT_EQ(service_->delete_volume(bob_, "data").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->delete_volume(bob_, "data").status().message(), "volume 'data' does not exist");
  auto mounted = service_->delete_volume(alice_, "data");
  ASSERT_FALSE(mounted.is_ok());
  EXPECT_EQ(mounted.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(mounted.status().message().find("mounted by cluster a"), std::string::npos);
  EXPECT_EQ(service_->volumes(alice_).size(), 1u);
  EXPECT_TRUE(service_->volumes(bob_).empty());
}

TEST_F(ServiceTest, GpuHoldersAreNamedToTheirOwnerAndTheAdminOnly) {
  ASSERT_TRUE(service_->create_cluster(alice_, spec("a", 2, 1)).is_ok());
  ASSERT_TRUE(service_->create_cluster(bob_, spec("b", 2, 1)).is_ok());
  auto holders = [this](const User& u) {
    std::vector<std::string> out;
    for (const auto& g : service_->gpus(u)) out.push_back(g.holder + (g.held ? "+" : "-"));
    return out;
  };
  EXPECT_EQ(holders(admin_), (std::vector<std::string>{"a-launcher+", "a-worker-0+", "b-launcher+", "b-worker-0+"}));
  EXPECT_EQ(holders(alice_), (std::vector<std::string>{"a-launcher+", "a-worker-0+", "+", "+"}));
  EXPECT_EQ(holders(bob_), (std::vector<std::string>{"+", "+", "b-launcher+", "b-worker-0+"}));
}

TEST_F(ServiceTest, TokensExpireAndAreRevokedAtOnce) {
  TokenRequest hour;
  hour.expires_in = std::chrono::hours(1);
  hour.description = "ci";
  auto made = service_->create_token(alice_, "alice", hour);
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  EXPECT_GT(made->info.expires_at, made->info.created_at);
  EXPECT_EQ(made->info.expires_at - made->info.created_at, 3600);
  EXPECT_EQ(service_->authenticate(made->token)->name, "alice");
  // A token whose expiry has passed authenticates no one (expired in 1970 here).
  const std::string old = new_token();
  ASSERT_TRUE(db_->lock().insert_token({0, "alice", "old", 0, 1}, hash_token(old)).is_ok());
  EXPECT_FALSE(service_->authenticate(old).has_value());

  auto listed = service_->tokens(alice_, "alice");
  ASSERT_TRUE(listed.is_ok());
  ASSERT_EQ(listed->size(), 3u);  // the first from create_user, "ci", "old"
  EXPECT_EQ((*listed)[1].description, "ci");
  EXPECT_TRUE((*listed)[2].expired(1000));
  EXPECT_FALSE((*listed)[0].expired(1000));

  // Only alice and the admin touch alice's tokens; bob learns nothing of the name.
  EXPECT_EQ(service_->tokens(bob_, "alice").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->tokens(bob_, "nobody").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->revoke_token(bob_, "alice", made->info.id).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->create_token(bob_, "alice").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->tokens(admin_, "nobody").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->revoke_token(alice_, "alice", 999).status().code(), StatusCode::kNotFound);
  // An id of another user's token under your own name is just not yours.
  auto admins = service_->tokens(admin_, "admin");
  ASSERT_TRUE(admins.is_ok() && !admins->empty());
  EXPECT_EQ(service_->revoke_token(alice_, "alice", (*admins)[0].id).status().code(), StatusCode::kNotFound);
  // The admin keeps one valid token: no one else could make them another.
  EXPECT_EQ(service_->revoke_token(admin_, "admin", (*admins)[0].id).status().code(), StatusCode::kFailedPrecondition);
  auto spare = service_->create_token(admin_, "admin");
  ASSERT_TRUE(spare.is_ok());
  EXPECT_TRUE(service_->revoke_token(admin_, "admin", (*admins)[0].id).is_ok());

  ASSERT_TRUE(service_->revoke_token(alice_, "alice", made->info.id).is_ok());
  EXPECT_FALSE(service_->authenticate(made->token).has_value());
  EXPECT_EQ(service_->tokens(alice_, "alice")->size(), 2u);
  auto second = service_->create_token(alice_, "alice");
  ASSERT_TRUE(second.is_ok());
  EXPECT_EQ(second->info.expires_at, 0);
  ASSERT_TRUE(service_->revoke_token(admin_, "alice", second->info.id).is_ok());
  EXPECT_FALSE(service_->authenticate(second->token).has_value());
}

TEST_F(ServiceTest, AUserIsDeletedOnlyWhenTheyOwnNothing) {
  ASSERT_TRUE(service_->create_cluster(bob_, spec("b", 2)).is_ok());
  ASSERT_TRUE(service_->create_volume(bob_, {"bobs", false, ""}).is_ok());
  EXPECT_EQ(service_->delete_user(alice_, "bob").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->delete_user(admin_, "admin").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(service_->delete_user(admin_, "nobody").status().code(), StatusCode::kNotFound);
  auto owns = service_->delete_user(admin_, "bob");
  ASSERT_FALSE(owns.is_ok());
  EXPECT_EQ(owns.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(owns.status().message().find("1 cluster(s) and 1 volume(s)"), std::string::npos) << owns.status().message();
  // A cluster being deleted still counts until the reconciler has removed it.
  ASSERT_TRUE(service_->delete_cluster(admin_, "b").is_ok());
  ASSERT_TRUE(service_->delete_volume(admin_, "bobs").is_ok());
  EXPECT_EQ(service_->delete_user(admin_, "bob").status().code(), StatusCode::kFailedPrecondition);
  for (const auto& r : db_->lock().containers("b")) ASSERT_TRUE(db_->lock().delete_container(r.status.name).is_ok());
  ASSERT_TRUE(db_->lock().delete_cluster("b").is_ok());
  EXPECT_EQ(service_->authenticate(bob_token_)->name, "bob");
  Job job;
  job.cluster = "b";
  job.owner = "bob";
  job.command = "id";
  auto job_id = db_->lock().insert_job(job);
  ASSERT_TRUE(job_id.is_ok());
  auto deleted = service_->delete_user(admin_, "bob");
  ASSERT_TRUE(deleted.is_ok()) << deleted.status().message();
  EXPECT_FALSE(service_->authenticate(bob_token_).has_value());
  // A request authenticated before the deletion makes nothing after it.
  EXPECT_EQ(service_->create_cluster(bob_, spec("late", 2)).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(service_->create_volume(bob_, {"late", false, ""}).status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(db_->lock().cluster_names().empty());
  EXPECT_FALSE(db_->lock().user("bob").has_value());
  EXPECT_FALSE(db_->lock().job(*job_id).has_value());
  // The name can be given again, with nothing of before.
  auto again = service_->create_user(admin_, "bob");
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(service_->tokens(admin_, "bob")->size(), 1u);
  EXPECT_EQ(service_->users(admin_)->size(), 3u);
}

TEST(Tokens, AreRandomAndKeptHashed) {
  const std::string a = new_token(), b = new_token();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("edt_", 0), 0u);
  EXPECT_EQ(a.size(), 4u + 64u);
  EXPECT_EQ(hash_token(a), hash_token(a));
  EXPECT_EQ(hash_token(a).size(), 64u);
  EXPECT_NE(hash_token(a), hash_token(b));
}

}  // namespace
// Whether a loop device is backed by `image` (/sys/block/loop*/loop/backing_file).
bool loop_backs(const std::string& image) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/block", ec)) {
    std::ifstream in(e.path() / "loop" / "backing_file");
    std::string backing;
    if (std::getline(in, backing) && backing.rfind(image, 0) == 0) return true;
  }
  return false;
}

// --volume-size: each managed volume a disk of its own, which an upload (or
// a container) cannot fill past its bound; deleting it leaves no mount and
// no loop device; a restarted host's volumes are mounted again.
TEST_F(ServiceTest, BoundedVolumesAreDisksOfTheirOwn) {
  if (std::string why = bounded_disks_unavailable(); !why.empty()) GTEST_SKIP() << why;
  ServiceOptions options{AddressRange::parse("127.90.0.0/29").value(), dir_.string(), [](const std::string&) {},
                         DiskBound{32 << 20, 0, true}};
  Service bounded(db_.get(), options);
  auto volume = bounded.create_volume(alice_, {"small", false, ""});
  ASSERT_TRUE(volume.is_ok()) << volume.status().message();
  const std::string image = dir_.string() + "/volume-disks/small.disk";
  struct Cleanup {
    std::string at, image;
    ~Cleanup() { (void)remove_bounded_disk(image, at); }
  } cleanup{volume->host_path, image};
  EXPECT_TRUE(is_mount_point(volume->host_path));
  EXPECT_EQ(std::filesystem::file_size(image), uint64_t{32} << 20);

  ASSERT_TRUE(bounded.upload_file(alice_, "small", "fits", std::string(1 << 20, 'x')).is_ok());
  auto full = bounded.upload_file(alice_, "small", "over/the/bound", std::string(40 << 20, 'x'));
  ASSERT_FALSE(full.is_ok());
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted) << full.status().message();
  EXPECT_NE(full.status().message().find("volume 'small' has no room"), std::string::npos) << full.status().message();
  EXPECT_NE(full.status().message().find("bounded to 32 MiB"), std::string::npos) << full.status().message();
  EXPECT_TRUE(bounded.upload_file(alice_, "small", "still", "room for a little").is_ok()) << "the failed upload left nothing";

  // The host restarted: the disk file stayed, its mount did not.
  ASSERT_EQ(::umount2(volume->host_path.c_str(), MNT_DETACH), 0);
  ASSERT_FALSE(is_mount_point(volume->host_path));
  ASSERT_TRUE(bounded.remount_volumes().is_ok());
  EXPECT_TRUE(is_mount_point(volume->host_path));
  EXPECT_TRUE(std::filesystem::exists(volume->host_path + "/fits")) << "the volume's files are on its disk";

  ASSERT_TRUE(bounded.delete_volume(alice_, "small").is_ok());
  EXPECT_FALSE(is_mount_point(volume->host_path));
  EXPECT_FALSE(std::filesystem::exists(volume->host_path));
  EXPECT_FALSE(std::filesystem::exists(image));
  EXPECT_FALSE(loop_backs(image)) << "a loop device still holds " << image;
}

}  // namespace edt::control
