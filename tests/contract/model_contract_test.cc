// The C++ model agrees with the API contract (api/openapi.json, as embedded
// in edtd): its constants equal the document's limits, its checks refuse
// just past them, and the JSON it writes has the documented fields. Change
// a limit in one place only and this fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/units.h"
#include "control/api/http.h"
#include "control/model/cluster.h"
#include "control/model/cluster_json.h"
#include "control/model/states.h"
#include "edt_api/contract.h"

namespace edt::control {
namespace {

using nlohmann::json;

const json& document() {
  static const json kDocument = json::parse(api::openapi_text());
  return kDocument;
}

const json& schema(const std::string& name) { return document().at("components").at("schemas").at(name); }

std::set<std::string> keys(const json& object) {
  std::set<std::string> out;
  for (auto it = object.begin(); it != object.end(); ++it) out.insert(it.key());
  return out;
}

std::set<std::string> property_names(const std::string& name) { return keys(schema(name).at("properties")); }

// A create request with every field the document lists, valid as written.
json full_spec() {
  return {{"name", "tthvd"},      {"framework", "megatron"}, {"containers", 2},
          {"image", "edt"},       {"gpu", {{"model", "NVIDIA-P4"}, {"count", 1}}},
          {"shm", "1Gi"},         {"memory", "512Gi"},      {"cpus", "1.5"},  {"mounts", json::array({{{"volume", "data"}, {"path", "/data"}, {"read_only", true}}})},
          {"env", {{"A", "b"}}},   {"drain_timeout", "90s"},
          {"megatron", {{"tensor_parallel", 1}, {"pipeline_parallel", 2}}},
          {"min_containers", 2},  {"max_containers", 64},   {"priority", 5}};
}

Status parse_with(const std::string& key, const json& value) {
  json body = full_spec();
  body[key] = value;
  ClusterSpec spec;
  return parse_cluster_spec(body, &spec);
}

TEST(ModelContract, ContainerCountLimitsAreTheDocuments) {
  EXPECT_EQ(schema("ContainerCount").at("minimum"), kMinContainers);
  EXPECT_EQ(schema("ContainerCount").at("maximum"), kMaxContainers);
  int n = 0;
  for (const json& count : {schema("ContainerCount")["minimum"], schema("ContainerCount")["maximum"]})
    EXPECT_TRUE(check_container_count(count, "containers", &n).is_ok()) << count;
  EXPECT_FALSE(check_container_count(schema("ContainerCount")["minimum"].get<int>() - 1, "containers", &n).is_ok());
  EXPECT_FALSE(check_container_count(schema("ContainerCount")["maximum"].get<int>() + 1, "containers", &n).is_ok());
}

TEST(ModelContract, NamesAreTheDocuments) {
  EXPECT_EQ(schema("ClusterName").at("maxLength"), kMaxClusterNameLength);
  const size_t longest = schema("ClusterName")["maxLength"];
  EXPECT_TRUE(check_cluster_name(std::string(longest, 'a')).is_ok());
  EXPECT_FALSE(check_cluster_name(std::string(longest + 1, 'a')).is_ok());
  const size_t longest_resource = schema("ResourceName").at("maxLength");
  EXPECT_TRUE(check_resource_name(std::string(longest_resource, 'a'), "name", "volume").is_ok());
  EXPECT_FALSE(check_resource_name(std::string(longest_resource + 1, 'a'), "name", "volume").is_ok());
  EXPECT_FALSE(check_cluster_name("-a").is_ok());
  EXPECT_FALSE(check_cluster_name("A").is_ok());
}

TEST(ModelContract, FrameworksAreTheDocuments) {
  EXPECT_EQ(schema("Framework").at("enum").get<std::vector<std::string>>(), known_frameworks());
  EXPECT_EQ(keys(schema("Framework").at("x-edt-labels")),
            std::set<std::string>(known_frameworks().begin(), known_frameworks().end()));
}

TEST(ModelContract, PhasesAreTheDocuments) {
  std::set<std::string> documented;
  for (const char* name : {"ClusterPhase", "ContainerPhase"})
    for (const auto& p : schema(name).at("enum")) documented.insert(p.get<std::string>());
  std::set<std::string> model;
  for (Phase p : {Phase::kPending, Phase::kCreating, Phase::kRunning, Phase::kScaling, Phase::kFailed,
                  Phase::kDeleting, Phase::kStopping, Phase::kDraining})
    model.insert(to_string(p));
  EXPECT_EQ(documented, model);
  EXPECT_EQ(schema("ClusterPhase").at("enum").size(), 6u);  // Stopping, Draining: a container's phases only
}

TEST(ModelContract, GpuCountLimitsAreTheDocuments) {
  const int most = schema("GpuCount").at("maximum");
  const int least = schema("GpuCount").at("minimum");
  EXPECT_TRUE(parse_with("gpu", {{"model", "NVIDIA-P4"}, {"count", most}}).is_ok());
  EXPECT_TRUE(parse_with("gpu", {{"model", "NVIDIA-P4"}, {"count", least}}).is_ok());
  EXPECT_FALSE(parse_with("gpu", {{"model", "NVIDIA-P4"}, {"count", most + 1}}).is_ok());
  EXPECT_FALSE(parse_with("gpu", {{"model", "NVIDIA-P4"}, {"count", least - 1}}).is_ok());
}

TEST(ModelContract, ParallelSizeLimitsAreTheDocuments) {
  const int most = schema("ParallelSize").at("maximum");
  const int least = schema("ParallelSize").at("minimum");
  EXPECT_EQ(most, kMaxParallelSize);
  // `most` containers of one GPU each are divisible by a size of `most`.
  auto parse = [](int size, int containers) {
    json body = full_spec();
    body["containers"] = containers;
    body["megatron"] = {{"tensor_parallel", size}};
    ClusterSpec spec;
    return parse_cluster_spec(body, &spec);
  };
  EXPECT_TRUE(parse(least, 2).is_ok());
  EXPECT_FALSE(parse(least - 1, 2).is_ok());
  EXPECT_FALSE(parse(most + 1, 2).is_ok());
  json body = full_spec();
  body["gpu"]["count"] = 16;
  body["containers"] = most / 16;
  body["megatron"] = {{"pipeline_parallel", most}};
  ClusterSpec spec;
  EXPECT_TRUE(parse_cluster_spec(body, &spec).is_ok()) << body.dump();
}

TEST(ModelContract, ShmLimitsAndUnitsAreTheDocuments) {
  const json& bytes = schema("ShmSize").at("x-edt-bytes");
  EXPECT_EQ(bytes.at("default"), kDefaultShmBytes);
  const uint64_t least = bytes.at("minimum"), most = bytes.at("maximum");
  EXPECT_TRUE(parse_with("shm", least).is_ok());
  EXPECT_TRUE(parse_with("shm", most).is_ok());
  EXPECT_FALSE(parse_with("shm", least - 1).is_ok());
  EXPECT_FALSE(parse_with("shm", most + 1).is_ok());
  for (const auto& [suffix, scale] : schema("ShmSize").at("x-edt-size-units").items()) {
    for (std::string unit : {suffix, std::string(suffix.size(), 'X')}) {
      if (unit != suffix) std::transform(suffix.begin(), suffix.end(), unit.begin(), ::toupper);
      auto parsed = parse_size("3" + unit);
      ASSERT_TRUE(parsed.is_ok()) << unit;
      EXPECT_EQ(*parsed, 3 * scale.get<uint64_t>()) << unit;
    }
  }
  EXPECT_FALSE(parse_size("3q").is_ok());
}

TEST(ModelContract, MemoryLimitsAreTheDocuments) {
  const json& bytes = schema("MemoryLimit").at("x-edt-bytes");
  const uint64_t least = bytes.at("minimum"), most = bytes.at("maximum"), headroom = bytes.at("headroom");
  EXPECT_EQ(least, kMinMemoryBytes);
  EXPECT_EQ(headroom, kMemoryHeadroomBytes);
  auto parse = [](uint64_t shm, uint64_t memory) {
    json body = full_spec();
    body["shm"] = shm;
    body["memory"] = memory;
    ClusterSpec spec;
    return parse_cluster_spec(body, &spec);
  };
  EXPECT_TRUE(parse(kMinShmBytes, least).is_ok());
  EXPECT_TRUE(parse(kMinShmBytes, most).is_ok());
  EXPECT_FALSE(parse(kMinShmBytes, least - 1).is_ok());
  EXPECT_FALSE(parse(kMinShmBytes, most + 1).is_ok());
  EXPECT_TRUE(parse(1ull << 30, (1ull << 30) + headroom).is_ok());
  EXPECT_FALSE(parse(1ull << 30, (1ull << 30) + headroom - 1).is_ok());
}

TEST(ModelContract, CpuLimitsAreTheDocuments) {
  const json& cpu = schema("CpuLimit");
  const int64_t least = cpu.at("x-edt-millicpus").at("minimum"), most = cpu.at("x-edt-millicpus").at("maximum");
  EXPECT_EQ(least, kMinCpuMillis);
  EXPECT_EQ(most, kMaxCpuMillis);
  // The number form's range is the same, in CPUs.
  EXPECT_DOUBLE_EQ(cpu.at("oneOf").at(1).at("minimum").get<double>() * 1000, static_cast<double>(least));
  EXPECT_DOUBLE_EQ(cpu.at("oneOf").at(1).at("maximum").get<double>() * 1000, static_cast<double>(most));
  EXPECT_TRUE(parse_with("cpus", format_cpus(least)).is_ok());
  EXPECT_TRUE(parse_with("cpus", format_cpus(most)).is_ok());
  EXPECT_FALSE(parse_with("cpus", format_cpus(least - 1)).is_ok());
  EXPECT_FALSE(parse_with("cpus", format_cpus(most + 1)).is_ok());
  EXPECT_TRUE(parse_with("cpus", least / 1000.0).is_ok());
  EXPECT_FALSE(parse_with("cpus", (most + 1) / 1000.0).is_ok());
}

TEST(ModelContract, DrainTimeoutLimitsAndUnitsAreTheDocuments) {
  const json& ms = schema("DrainTimeout").at("x-edt-duration-ms");
  EXPECT_EQ(ms.at("default"), kDefaultDrainTimeout.count());
  EXPECT_EQ(ms.at("maximum"), kMaxDrainTimeout.count());
  const int64_t least = ms.at("minimum"), most = ms.at("maximum");
  EXPECT_TRUE(parse_with("drain_timeout", format_duration(std::chrono::milliseconds(least))).is_ok());
  EXPECT_TRUE(parse_with("drain_timeout", format_duration(std::chrono::milliseconds(most))).is_ok());
  EXPECT_TRUE(parse_with("drain_timeout", most / 1000).is_ok());
  EXPECT_FALSE(parse_with("drain_timeout", format_duration(std::chrono::milliseconds(most + 1))).is_ok());
  EXPECT_FALSE(parse_with("drain_timeout", most / 1000 + 1).is_ok());
  EXPECT_FALSE(parse_with("drain_timeout", least - 1).is_ok());
  for (const auto& [suffix, scale] : schema("DrainTimeout").at("x-edt-duration-units").items()) {
    auto parsed = parse_duration("3" + suffix);
    ASSERT_TRUE(parsed.is_ok()) << suffix;
    EXPECT_EQ(parsed->count(), 3 * scale.get<int64_t>()) << suffix;
  }
  EXPECT_FALSE(parse_duration("3q").is_ok());
}

TEST(ModelContract, SystemDirectoriesAreTheDocuments) {
  for (const auto& dir : schema("MountPath").at("x-edt-system-directories")) {
    EXPECT_FALSE(check_mount_path(dir.get<std::string>(), "path").is_ok()) << dir;
    EXPECT_FALSE(check_mount_path(dir.get<std::string>() + "/x", "path").is_ok()) << dir;
  }
  EXPECT_TRUE(check_mount_path("/data", "path").is_ok());
  EXPECT_TRUE(check_mount_path("/root/data", "path").is_ok());
}

TEST(ModelContract, CreateRequestFieldsAreTheDocuments) {
  EXPECT_EQ(keys(full_spec()), property_names("ClusterSpec"));
  ClusterSpec spec;
  EXPECT_TRUE(parse_cluster_spec(full_spec(), &spec).is_ok());
  EXPECT_FALSE(parse_with("extra", 1).is_ok());
  for (const auto& field : schema("ClusterSpec").at("required")) {
    json body = full_spec();
    body.erase(field.get<std::string>());
    EXPECT_FALSE(parse_cluster_spec(body, &spec).is_ok()) << field;
  }
  EXPECT_EQ(keys(full_spec()["gpu"]), property_names("GpuRequest"));
  EXPECT_EQ(keys(full_spec()["mounts"][0]), property_names("Mount"));
  EXPECT_EQ(keys(full_spec()["megatron"]), property_names("MegatronParallel"));
}

TEST(ModelContract, ClusterJsonHasTheDocumentedFields) {
  Cluster cluster;
  ClusterSpec spec;
  ASSERT_TRUE(parse_cluster_spec(full_spec(), &spec).is_ok());
  cluster.spec = spec;
  ContainerStatus launcher;
  launcher.name = container_name("tthvd", 0);
  launcher.gpus = {0};
  // Placed by Slurm: its node and job too.
  launcher.node = "n1";
  launcher.slurm_job = 7;
  cluster.containers.push_back(launcher);
  ContainerStatus local;
  local.name = container_name("tthvd", 1);
  cluster.containers.push_back(local);
  cluster.queued = {3, 1000, 1, "waiting for GPUs"};
  const json j = cluster_to_json(cluster);
  EXPECT_EQ(keys(j), property_names("Cluster"));
  EXPECT_EQ(keys(j["status"]), property_names("ClusterStatus"));
  EXPECT_EQ(keys(j["status"]["queued"]), property_names("QueuedRequest"));
  EXPECT_EQ(keys(j["status"]["containers"][0]), property_names("Container"));
  std::set<std::string> required;
  for (const auto& field : schema("Container").at("required")) required.insert(field.get<std::string>());
  EXPECT_EQ(keys(j["status"]["containers"][1]), required);
  EXPECT_EQ(keys(j["gpu"]), property_names("GpuRequest"));
  EXPECT_EQ(keys(j["mounts"][0]), property_names("Mount"));
}

TEST(ModelContract, ErrorJsonHasTheDocumentedFields) {
  const Status e = invalid("containers", "too few", "ask for more");
  const json j = error_json(http_status(e.code()), e);
  EXPECT_EQ(keys(j), property_names("Error"));
  EXPECT_EQ(keys(j["error"]), property_names("ErrorDetail"));
}

// What the CLI compiles against is the same document.
TEST(ModelContract, GeneratedConstantsMatchTheText) {
  EXPECT_EQ(api::limits::ContainerCount::maximum, schema("ContainerCount")["maximum"]);
  EXPECT_EQ(api::limits::Framework::values.size(), known_frameworks().size());
  EXPECT_EQ(api::fields::ClusterSpec::containers, "containers");
}

}  // namespace
}  // namespace edt::control
