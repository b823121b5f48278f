// ControlStore: edtd's state in one SQLite database (WAL mode): users and
// their tokens (hashed), images, volumes, the GPU inventory, clusters with
// their containers, and jobs.
//
// Desired state (a cluster's spec) and the allotments made for it (each
// container's address and GPUs) change together in one transaction, so a
// refused request changes nothing and two requests cannot take the same
// address or GPU. The reconcile loop records what it observes (phases,
// sandbox pids) through the update_* calls.
//
// Thread-safe: every call takes the store's one connection under a mutex.
// Calls that name a missing thing return NotFound (or nullopt).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "control/model/cluster.h"
#include "edt/status.h"

namespace edt::control {

// A block of addresses in 127.0.0.0/8 that containers are given, e.g.
// "127.77.0.0/16". The first address of the block is never given out.
struct AddressRange {
  uint32_t base = 0;  // host order
  uint32_t size = 0;
  static Result<AddressRange> parse(const std::string& cidr);
  std::string address(uint32_t offset) const;
};

struct User {
  std::string name;
  bool admin = false;
};

struct Gpu {
  int index = 0;
  std::string model;
  bool simulated = false;
  std::string holder;  // container that holds it; empty when free
};

// A sandbox as edtd found or started it: enough to find it again after a
// restart. pid is the sandbox's init; pid_start its start time (clock
// ticks after boot), so a reused pid is not mistaken for it.
struct SandboxRef {
  int64_t pid = 0;
  uint64_t pid_start = 0;
};

// A container row: its public status plus edtd's bookkeeping.
struct ContainerRecord {
  ContainerStatus status;
  SandboxRef sandbox;
  int64_t stopping_since_ms = 0;  // when SIGTERM was sent; 0 before
  int64_t creating_since_ms = 0;  // when its sandbox was started
};

namespace job_state {
inline constexpr const char* kRunning = "Running";
inline constexpr const char* kSucceeded = "Succeeded";
inline constexpr const char* kFailed = "Failed";
}  // namespace job_state

struct Job {
  int64_t id = 0;
  std::string cluster;
  std::string container;
  std::string owner;
  std::string command;
  std::string state = job_state::kRunning;
  int exit_code = -1;
  std::string message;
  SandboxRef process;  // the host-side wrapper that waits for the command
  int64_t created_at = 0;
  int64_t finished_at = 0;
};

// Something that happened to a cluster, for people (the console's event list).
struct ClusterEvent {
  int64_t time_ms = 0;
  std::string type;  // Created, Scaling, Running, Failed, Restarted, Deleting
  std::string message;
};

class ControlStore {
 public:
  static Result<std::unique_ptr<ControlStore>> open(const std::string& path);
  ~ControlStore();
  ControlStore(const ControlStore&) = delete;
  ControlStore& operator=(const ControlStore&) = delete;

  // Users and tokens. Tokens are stored as their SHA-256 (hex).
  Status create_user(const std::string& name, bool admin);
  std::vector<User> users();
  Status add_token(const std::string& user, const std::string& token_hash);
  std::optional<User> user_for_token(const std::string& token_hash);

  // Images, volumes and the GPU inventory.
  Status put_image(const Image& image);
  std::vector<Image> images();
  Status create_volume(const Volume& volume);  // AlreadyExists if taken
  std::vector<Volume> volumes();
  std::optional<Volume> volume(const std::string& name);
  // Removes a volume no cluster mounts (FailedPrecondition if one does).
  Status delete_volume(const std::string& name);
  // Replaces the inventory; GPUs held by containers keep their holder.
  Status set_gpus(const std::vector<Gpu>& gpus);
  std::vector<Gpu> gpus();
  // Images, the volumes `user` may mount (admin: all) and free GPUs.
  Catalog catalog(const User& user);

  // Clusters. create_cluster checks the spec against the catalog, the name
  // and the free addresses, and allots every container in one transaction.
  Refusal create_cluster(const ClusterSpec& spec, const std::string& owner, const AddressRange& range, int64_t now);
  // Grows (allots new workers) or shrinks (marks the highest workers
  // leaving) the cluster to `containers`.
  Refusal scale_cluster(const std::string& name, int containers, const AddressRange& range);
  // Marks the cluster and all its containers for removal.
  Status mark_deleting(const std::string& name);
  std::optional<Cluster> cluster(const std::string& name);
  std::vector<Cluster> clusters();  // all, by name
  std::vector<std::string> cluster_names();
  std::vector<ContainerRecord> containers(const std::string& cluster);

  Status update_cluster_phase(const std::string& name, const std::string& phase, const std::string& message,
                              bool ever_running);
  Status set_spec_containers(const std::string& name, int containers);
  Status update_container(const ContainerRecord& record);
  // Marks the given containers leaving (a failed create or scale).
  Status mark_leaving(const std::vector<std::string>& containers);
  // Drops a container's row, which frees its address and GPUs.
  Status delete_container(const std::string& name);
  Status delete_cluster(const std::string& name);

  // Events of a cluster, oldest first; they go with the cluster.
  Status add_event(const std::string& cluster, const std::string& type, const std::string& message);
  std::vector<ClusterEvent> events(const std::string& cluster);

  // Grows with every row written; equal values mean nothing changed in
  // between (readers cache what they built from the store by it).
  int64_t version();

  // Jobs.
  Result<int64_t> create_job(const Job& job);
  Status update_job(const Job& job);
  std::optional<Job> job(int64_t id);
  std::vector<Job> jobs_running();

 private:
  explicit ControlStore(sqlite3* db) : db_(db) {}
  Status exec(const char* sql);
  Catalog catalog_locked(const User& user);
  std::vector<ContainerRecord> containers_locked(const std::string& cluster);
  std::optional<Cluster> cluster_locked(const std::string& name);
  // Allots containers [from, to) of `spec`: addresses and GPUs. Inside a transaction.
  Refusal allot_locked(const ClusterSpec& spec, int from, int to, const AddressRange& range);

  std::mutex mu_;
  sqlite3* db_;  // guarded by mu_
};

}  // namespace edt::control
