// The cluster model: what a user asks for (ClusterSpec) and what edtd reports
// (ClusterStatus, ContainerStatus), their JSON forms, and the checks a spec
// must pass before anything is made for it.
//
// A cluster of N containers has one launcher, "<name>-launcher" (index 0),
// and N-1 workers, "<name>-worker-<i>" (index i+1). Checks that need no state
// live in parse_cluster_spec(); checks against what exists (images, volumes,
// GPUs) take a Catalog, a snapshot the caller reads from the store.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "control/model/api_error.h"

namespace edt::control {

inline constexpr int kMinContainers = 2;
inline constexpr int kMaxContainers = 64;
inline constexpr uint64_t kDefaultShmBytes = 64ull << 20;
// Longest cluster name: "<name>-worker-NN" must stay a DNS label (63).
inline constexpr size_t kMaxClusterNameLength = 40;

// The frameworks a cluster may be made for, in the order the API lists them.
const std::vector<std::string>& known_frameworks();

struct GpuRequest {
  std::string model;  // empty: no GPUs
  int count = 0;      // whole devices per container
};

struct Mount {
  std::string volume;
  std::string path;  // absolute, normalised, inside the container
  bool read_only = false;
};

struct ClusterSpec {
  std::string name;
  std::string framework;
  int containers = 0;
  std::string image = "edt";
  GpuRequest gpu;
  uint64_t shm_bytes = kDefaultShmBytes;
  std::vector<Mount> mounts;
  std::map<std::string, std::string> env;
};

// Phases, as the API spells them.
namespace phase {
inline constexpr const char* kPending = "Pending";
inline constexpr const char* kCreating = "Creating";
inline constexpr const char* kRunning = "Running";
inline constexpr const char* kScaling = "Scaling";
inline constexpr const char* kFailed = "Failed";
inline constexpr const char* kDeleting = "Deleting";
inline constexpr const char* kStopping = "Stopping";
}  // namespace phase

struct ContainerStatus {
  std::string name;  // also its hostname
  int index = 0;     // 0: launcher; i+1: worker-i
  std::string address;
  std::vector<int> gpus;
  std::string phase = phase::kPending;
  std::string message;
  int64_t started_at = 0;  // unix seconds it became Running; 0 before
  bool leaving = false;    // being removed (scale down or delete)

  std::string role() const { return index == 0 ? "launcher" : "worker"; }
};

struct Cluster {
  ClusterSpec spec;
  std::string owner;
  std::string phase = phase::kPending;
  std::string message;
  bool deleting = false;
  bool ever_running = false;
  int64_t created_at = 0;
  std::vector<ContainerStatus> containers;  // by index
};

struct Image {
  std::string name;
  std::string root;  // "/" for the host's file system
  std::vector<std::string> frameworks;
  bool builtin = false;
  bool carries(const std::string& framework) const;
};

struct Volume {
  std::string name;
  std::string owner;
  std::string host_path;
  bool managed = true;  // a directory edtd made under its data dir (removed with the volume)
};

// What a spec is checked against: images, the volumes its owner may mount,
// and the GPUs free per model.
struct Catalog {
  std::map<std::string, Image> images;
  std::map<std::string, Volume> volumes;
  std::map<std::string, int> gpus_free;   // model -> free devices
  std::map<std::string, int> gpus_total;  // model -> all devices
};

// "<cluster>-launcher" for index 0, "<cluster>-worker-<index-1>" otherwise.
std::string container_name(const std::string& cluster, int index);

// Checks `name` is a DNS label short enough for container names.
Refusal check_cluster_name(const std::string& name, const std::string& field = "name");

// Reads a create request. Refuses unknown fields, wrong types and values that
// are wrong whatever exists (a bad name, < 2 containers, a bad shm size, a
// relative mount path...). Fills `out` on success.
Refusal parse_cluster_spec(const nlohmann::json& body, ClusterSpec* out);

// Checks a parsed spec against what exists: the image and whether it
// carries the framework, the volumes, the GPU model and that enough are free
// for `new_containers` more containers.
Refusal check_against_catalog(const ClusterSpec& spec, const Catalog& catalog, int new_containers);

// Checks a container count for a create or a scale.
Refusal check_container_count(const nlohmann::json& value, const std::string& field, int* out);

// Mount paths: absolute, normalised, not over a system directory.
Refusal check_mount_path(const std::string& path, const std::string& field);

// A volume or user name: a DNS label.
Refusal check_resource_name(const std::string& name, const std::string& field, const std::string& what);

nlohmann::json spec_to_json(const ClusterSpec& spec);
nlohmann::json cluster_to_json(const Cluster& cluster);
nlohmann::json container_to_json(const ContainerStatus& container, const std::string& cluster);

// The hostfile of a cluster: the given containers, launcher first,
// "name slots=N", N its GPUs (1 without).
std::string render_hostfile(const std::vector<ContainerStatus>& containers);

}  // namespace edt::control
