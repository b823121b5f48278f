// The cluster model: what a user asks for (ClusterSpec) and what edtd reports
// (Cluster, ContainerStatus), and the checks of its values that need no
// state (a refusal names the field). Their JSON forms are in
// cluster_json.h; what a container is given (its hostfile, its
// environment) in container_files.h; checks against what exists in
// catalog.h.
//
// A cluster of N containers has one launcher, "<name>-launcher" (index 0),
// and N-1 workers, "<name>-worker-<i>" (index i+1).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/process.h"
#include "control/model/error.h"
#include "control/model/states.h"
#include "edt_api/contract.h"

namespace edt::control {

// The limits are the API contract's (api/openapi.json, through the
// generated edt_api/contract.h): change them there.
inline constexpr int kMinContainers = api::limits::ContainerCount::minimum;
inline constexpr int kMaxContainers = api::limits::ContainerCount::maximum;
inline constexpr uint64_t kDefaultShmBytes = api::limits::ShmSize::default_bytes;
inline constexpr uint64_t kMinShmBytes = api::limits::ShmSize::minimum_bytes;
inline constexpr uint64_t kMaxShmBytes = api::limits::ShmSize::maximum_bytes;
inline constexpr uint64_t kMinMemoryBytes = api::limits::MemoryLimit::minimum_bytes;
inline constexpr uint64_t kMaxMemoryBytes = api::limits::MemoryLimit::maximum_bytes;
// What a memory bound must hold beyond /dev/shm: the container's own processes.
inline constexpr uint64_t kMemoryHeadroomBytes = api::limits::MemoryLimit::headroom_bytes;
// A CPU bound, in thousandths of a CPU (0.01 to 1024 CPUs).
inline constexpr int64_t kMinCpuMillis = api::limits::CpuLimit::minimum_millicpus;
inline constexpr int64_t kMaxCpuMillis = api::limits::CpuLimit::maximum_millicpus;
inline constexpr int kMaxGpusPerContainer = api::limits::GpuCount::maximum;
inline constexpr std::chrono::milliseconds kDefaultDrainTimeout{api::limits::DrainTimeout::default_ms};
inline constexpr std::chrono::milliseconds kMaxDrainTimeout{api::limits::DrainTimeout::maximum_ms};
// Longest cluster name: "<name>-worker-NN" must stay a DNS label (63).
inline constexpr size_t kMaxClusterNameLength = api::limits::ClusterName::max_length;
inline constexpr int kMaxParallelSize = api::limits::ParallelSize::maximum;

// The frameworks a cluster may be made for, in the order the API lists them.
const std::vector<std::string>& known_frameworks();

struct GpuRequest {
  std::string model;  // empty: no GPUs
  int count = 0;      // whole devices per container
};

// A Megatron-LM cluster's model-parallel sizes, when its user gives them:
// its GPUs must divide by their product (Megatron-LM's data-parallel size
// is the GPUs over tensor x pipeline). 0: not given.
struct MegatronParallel {
  int tensor_parallel = 0;
  int pipeline_parallel = 0;

  bool given() const { return tensor_parallel > 0 || pipeline_parallel > 0; }
  int product() const { return std::max(tensor_parallel, 1) * std::max(pipeline_parallel, 1); }
};

struct Mount {
  std::string volume;
  std::string path;  // absolute, normalised, inside the container
  bool read_only = false;
};

// An elastic cluster's bounds (ClusterSpec::elastic): the scheduler keeps its
// containers within [min, max]; both 0 for a cluster of fixed size, which
// it never resizes.
struct ElasticBounds {
  int min = 0;
  int max = 0;
  bool elastic() const { return max > 0; }
};

inline constexpr int kMinPriority = api::limits::Priority::minimum;
inline constexpr int kMaxPriority = api::limits::Priority::maximum;

struct ClusterSpec {
  std::string name;
  std::string framework;
  int containers = 0;  // the size it has (or waits for, when queued), between elastic's bounds
  ElasticBounds elastic;
  int priority = 0;  // orders the queue: higher first
  std::string image = "edt";
  GpuRequest gpu;
  uint64_t shm_bytes = kDefaultShmBytes;
  uint64_t memory_bytes = 0;  // per container; 0: no bound
  int64_t cpu_millis = 0;     // per container, thousandths of a CPU (1500: "1.5"); 0: no bound
  std::vector<Mount> mounts;
  std::map<std::string, std::string> env;
  // How long a container leaving on scale-down may stay Draining (out of
  // the hostfile, waiting for the workers of edtrun jobs in it to leave)
  // before it is stopped anyway.
  std::chrono::milliseconds drain_timeout = kDefaultDrainTimeout;
  MegatronParallel megatron;  // framework megatron only
};

struct ContainerStatus {
  std::string name;  // also its hostname
  int index = 0;     // 0: launcher; i+1: worker-i
  std::string address;
  std::vector<int> gpus;
  Phase phase = Phase::kPending;
  std::string message;
  int64_t started_at = 0;  // unix seconds it became Running; 0 before
  bool leaving = false;    // being removed (scale down or delete)
  // Where it runs on a backend that places containers on other machines
  // (Slurm): its node and the engine's job; "" and 0 on the local backend.
  std::string node;
  int64_t slurm_job = 0;

  std::string role() const { return index == 0 ? "launcher" : "worker"; }
};

// A create or scale that waits for GPUs (the scheduler's queue): the size it
// waits for, since when, its place among the requests for its GPU model
// (1: next) and why it waits. containers 0: nothing waits.
struct QueuedRequest {
  int containers = 0;
  int64_t since_ms = 0;
  int position = 0;
  std::string reason;
  bool waiting() const { return containers > 0; }
};

struct Cluster {
  ClusterSpec spec;
  std::string owner;
  std::string team;  // the owner's; "" when they have none
  QueuedRequest queued;
  Phase phase = Phase::kPending;
  std::string message;
  // Why the last scale failed ("scale to 4 failed: ...; back to 2"); the
  // message once Running again, until the next scale. Empty otherwise.
  std::string scale_failure;
  bool deleting = false;
  bool ever_running = false;
  int64_t created_at = 0;
  std::vector<ContainerStatus> containers;  // by index
};

// A sandbox as edtd found or started it: enough to find it again after a
// restart (a pid with its start time, so a reused pid is not mistaken for it).
using SandboxRef = proc::ProcessId;

// A container row: its public status plus edtd's bookkeeping.
struct ContainerRecord {
  ContainerStatus status;
  SandboxRef sandbox;
  int64_t draining_since_ms = 0;  // when it began Draining; 0 if it never did
  int64_t stopping_since_ms = 0;  // when SIGTERM was sent; 0 before
  int64_t creating_since_ms = 0;  // when its sandbox was started
};

// Something that happened to a cluster, for people (the console's event list).
struct ClusterEvent {
  int64_t time_ms = 0;
  EventType type = EventType::kCreated;
  std::string message;
};

// "<cluster>-launcher" for index 0, "<cluster>-worker-<index-1>" otherwise.
std::string container_name(const std::string& cluster, int index);

// Checks `name` is a DNS label short enough for container names.
Status check_cluster_name(const std::string& name, const std::string& field = "name");

// Whether `containers` containers of `spec` (its GPUs per container, 1
// without) give a GPU count that divides by spec.megatron's tensor x
// pipeline parallel sizes; a refusal names `field` and says which counts do.
Status check_megatron_parallel(const ClusterSpec& spec, int containers, const std::string& field);

// A path in a container: absolute, normalised ('.', '..', '//' and a
// trailing '/' refused), no control character, at most PATH_MAX bytes.
Status check_container_path(const std::string& path, const std::string& field);
// Mount paths: container paths not over a system directory.
Status check_mount_path(const std::string& path, const std::string& field);

// A volume or user name: a DNS label.
Status check_resource_name(const std::string& name, const std::string& field, const std::string& what);

// A variable name: letters, digits and _, not first a digit, within the
// contract's length; the field is "env.<key>".
Status check_env_name(const std::string& key);

// A variable's value goes into sshd's configuration and into shells'
// environments: what either would read otherwise than written is refused
// (control characters, '"', '\\'), and so is one over the contract's length.
Status check_env_value(const std::string& key, const std::string& value);

// Whether `path` is `dir` or below it, by whole components (every absolute
// path is within "/").
bool path_within(const std::string& path, const std::string& dir);

}  // namespace edt::control
