// The JSON forms of the cluster model (cluster.h), as the API contract
// (api/openapi.json) gives them: reading a create or scale request, and
// writing a spec, a cluster, a container or an event.
//
// Parsing never throws: a body of the wrong shape, an unknown field, a
// wrong type or a value that is wrong whatever exists is a refusal naming
// the field (its path, such as "mounts[1].path"), and `out` is left as it
// was. Writing is total. No state; any thread may call these.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "control/model/cluster.h"

namespace edt::control {

// Reads a create request. Refuses unknown fields, wrong types and values that
// are wrong whatever exists (a bad name, < 2 containers, a bad shm size, a
// relative mount path...). Fills `out` on success.
Status parse_cluster_spec(const nlohmann::json& body, ClusterSpec* out);

// Checks a container count for a create or a scale.
Status check_container_count(const nlohmann::json& value, const std::string& field, int* out);

// Checks that `containers` lies within elastic `bounds` (when the cluster
// is elastic) and that min <= max; a refusal names `field` or min_containers.
Status check_elastic_bounds(const ElasticBounds& bounds, int containers, const std::string& field);

// Reads a drain timeout: a duration ("60s", "500ms", "2m") or whole
// seconds, from 0 to kMaxDrainTimeout.
Status parse_drain_timeout(const nlohmann::json& value, const std::string& field, std::chrono::milliseconds* out);

// 60000 ms -> "60s", 1500 ms -> "1500ms": how edtd writes a duration, and
// what parse_drain_timeout() reads back.
std::string format_duration(std::chrono::milliseconds duration);

// 1500 thousandths of a CPU -> "1.5", 2000 -> "2": how edtd writes a CPU
// bound, exactly (what parse_cluster_spec() reads back as "cpus").
std::string format_cpus(int64_t millis);

// A scale request: {"containers": N, "drain_timeout"?: ...} and nothing else.
struct ScaleRequest {
  int containers = 0;
  std::optional<std::chrono::milliseconds> drain_timeout;  // the cluster's new setting, if given
};
Status parse_scale_request(const nlohmann::json& body, ScaleRequest* out);

nlohmann::json spec_to_json(const ClusterSpec& spec);
nlohmann::json cluster_to_json(const Cluster& cluster);
nlohmann::json container_to_json(const ContainerStatus& container);
// {"time": "2026-01-01T00:00:00.000Z", "type", "message"}
nlohmann::json event_to_json(const ClusterEvent& event);

}  // namespace edt::control
