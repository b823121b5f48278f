// Database: edtd's state in one SQLite database (WAL mode): users and their
// tokens (hashed), teams and their GPU quotas, images, volumes, the GPU inventory with the container
// holding each, clusters with their containers and events, and jobs.
//
// It only persists: it reads and writes rows and keeps the schema current
// (schema.h); what may be written (catalog checks, allocation, ownership)
// is the service's. All access goes through a Tx, which holds the one
// connection for as long as it lives:
//   lock()         each statement stands alone (reads, single writes);
//   transaction()  BEGIN IMMEDIATE: nothing is kept unless commit() is
//                  called, so a refused request changes nothing and two
//                  requests cannot take the same address or GPU.
// Thread-safe: a Tx excludes every other; never open a second Tx on the
// thread that holds one. Reads of a missing thing return nullopt or an
// empty list; writes to a missing row return NotFound where it matters.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "control/model/catalog.h"
#include "control/model/cluster.h"
#include "control/model/job.h"
#include "control/model/teams.h"
#include "edt/status.h"

namespace edt::control {

class Database {
 public:
  class Tx;

  // Opens (or creates) the database at `path` and migrates it to the
  // current schema.
  static Result<std::unique_ptr<Database>> open(const std::string& path);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  Tx lock();
  Tx transaction();

 private:
  explicit Database(sqlite3* db) : db_(db) {}

  // Takes mu_; a second Tx on the thread that holds one is a bug (checked).
  std::unique_lock<std::mutex> acquire();

  std::mutex mu_;
  std::atomic<std::thread::id> holder_{};  // the thread holding mu_
  sqlite3* db_;                            // guarded by mu_
};

class Database::Tx {
 public:
  Tx(Tx&& other) noexcept;
  Tx& operator=(Tx&&) = delete;
  ~Tx();  // rolls back a transaction that was not committed
  Status commit();

  // Users and tokens. Tokens are kept as their SHA-256 (hex).
  Status insert_user(const User& user);  // AlreadyExists if taken
  std::vector<User> users();
  std::optional<User> user(const std::string& name);
  // Drops the user with their tokens and their jobs' records (the service
  // checks first that no cluster or volume of theirs is left).
  Status delete_user(const std::string& name);  // NotFound if none
  // token.user, description, created_at and expires_at; returns its new id.
  Result<int64_t> insert_token(const TokenInfo& token, const std::string& token_hash);  // NotFound: no such user
  std::vector<TokenInfo> tokens(const std::string& user);  // by id
  Status delete_token(const std::string& user, int64_t id);  // NotFound: no such token of that user
  // The token's user, if the token exists and has not expired by `now` (unix seconds).
  std::optional<User> user_for_token(const std::string& token_hash, int64_t now);
  // "" takes the user out of their team (the service checks the team exists).
  Status set_user_team(const std::string& user, const std::string& team);  // NotFound: no such user

  // Teams and their quotas (teams.h).
  Status insert_team(const std::string& name);  // AlreadyExists if taken
  std::vector<std::string> teams();             // by name
  // Drops the team and its quotas; its members are left without a team.
  Status delete_team(const std::string& name);  // NotFound if none
  Status put_quota(const Quota& quota);         // made or replaced
  Status delete_quota(const std::string& team, const std::string& model);  // NotFound if none
  std::vector<Quota> quotas();                  // by team, then model

  // Images, volumes and the GPU inventory.
  Status put_image(const Image& image);
  Status delete_image(const std::string& name);
  std::vector<Image> images();
  Status insert_volume(const Volume& volume);  // AlreadyExists if taken
  std::vector<Volume> volumes();
  std::optional<Volume> volume(const std::string& name);
  Status delete_volume(const std::string& name);
  // Replaces the inventory; GPUs held by containers keep their holder.
  Status set_gpus(const std::vector<Gpu>& gpus);
  std::vector<Gpu> gpus();  // by index, each with its holder
  Status hold_gpus(const std::string& container, const std::vector<int>& gpus);
  // Images, the volumes of `volume_owner` (every volume if nullopt) and the
  // GPUs per model, free and in all.
  Catalog catalog(const std::optional<std::string>& volume_owner);

  // Clusters.
  Status insert_cluster(const Cluster& cluster);  // its row only; containers are inserted one by one
  std::optional<Cluster> cluster(const std::string& name);
  std::vector<Cluster> clusters();  // all, by name
  std::vector<std::string> cluster_names();
  Status set_spec(const std::string& name, const ClusterSpec& spec);
  Status set_status(const std::string& name, Phase phase, const std::string& message, bool ever_running);
  Status set_scale_failure(const std::string& name, const std::string& failure);
  // The request that waits for GPUs (containers 0: none).
  Status set_queued(const std::string& name, const QueuedRequest& queued);
  // Marks the cluster deleting and all its containers leaving (NotFound if none).
  Status mark_deleting(const std::string& name);
  // Drops the cluster, its events and its jobs' records; FailedPrecondition
  // while containers remain.
  Status delete_cluster(const std::string& name);

  // Containers.
  Status insert_container(const std::string& cluster, const ContainerStatus& container);
  std::vector<ContainerRecord> containers(const std::string& cluster);  // by index
  std::set<std::string> addresses();  // of every container
  Status update_container(const ContainerRecord& record);
  Status mark_leaving(const std::vector<std::string>& containers);
  Status mark_leaving_from(const std::string& cluster, int index);  // containers [index, ...)
  // Drops a container's row and frees its GPUs.
  Status delete_container(const std::string& name);

  // Events of a cluster, oldest first; they go with the cluster.
  Status add_event(const std::string& cluster, EventType type, const std::string& message, int64_t time_ms);
  std::vector<ClusterEvent> events(const std::string& cluster);

  // Jobs.
  Result<int64_t> insert_job(const Job& job);
  Status update_job(const Job& job);
  std::optional<Job> job(int64_t id);
  std::vector<Job> jobs_running();
  std::vector<Job> jobs_of(const std::string& cluster);  // newest first
  std::set<int64_t> job_ids();
  Status delete_job(int64_t id);  // NotFound if none
  // Drops the records of jobs whose cluster is gone (left by edtds that kept them).
  Status delete_orphan_jobs();

  // Grows with every row written; equal values mean nothing changed in
  // between (readers cache what they built from the database by it).
  int64_t version();

 private:
  friend class Database;
  Tx(Database* owner, std::unique_lock<std::mutex> lock, bool transaction);

  Database* owner_;
  std::unique_lock<std::mutex> lock_;
  sqlite3* db_;
  bool open_transaction_;
};

}  // namespace edt::control
