#include "control/model/cluster_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "common/units.h"
#include "control/model/fields.h"

namespace edt::control {

using nlohmann::json;

namespace {

// A JSON integer as int64_t; one above INT64_MAX (JSON reads it as
// unsigned) as INT64_MAX, so that range checks see it as too large rather
// than wrapped to a negative number.
int64_t whole_number(const json& value) {
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return INT64_MAX;
  return value.get<int64_t>();
}

// A size (bytes, or a number with a unit) between `min` and `max`.
Status parse_bytes(const json& value, const std::string& field, uint64_t min, uint64_t max, uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<uint64_t>();
  } else if (value.is_string()) {
    auto size = parse_size(value.get<std::string>());
    if (!size.is_ok())
      return invalid(field, field + ": " + size.status().message(), "write a size such as \"512M\" or \"2Gi\"");
    *out = size.value();
  } else {
    return invalid(field, field + " must be a size such as \"512M\", not " + std::string(value.type_name()),
                   "write a size such as \"512M\" or \"2Gi\"");
  }
  if (*out < min || *out > max)
    return invalid(field,
                   field + " of " + std::to_string(*out) + " bytes is outside " + format_size(min) + ".." +
                       format_size(max),
                   "ask for a size between " + format_size(min) + " and " + format_size(max) + ", e.g. \"1Gi\"");
  return Status::ok();
}

// A memory bound must hold /dev/shm and the container's processes.
Status check_memory(const ClusterSpec& spec) {
  if (spec.memory_bytes == 0 || spec.memory_bytes >= spec.shm_bytes + kMemoryHeadroomBytes) return Status::ok();
  return invalid("memory",
                 "memory of " + format_size(spec.memory_bytes) + " cannot hold the shm of " +
                     format_size(spec.shm_bytes) + " and the container's processes",
                 "ask for at least " + std::to_string((spec.shm_bytes + kMemoryHeadroomBytes + (1 << 20) - 1) >> 20) +
                     "Mi (shm plus " + format_size(kMemoryHeadroomBytes) + "), or a smaller shm");
}

// Thousandths of a CPU in a decimal with at most 3 decimals ("1.5"); none
// when it is not one. Too many digits read as too large.
std::optional<int64_t> decimal_millis(const std::string& text) {
  const size_t point = text.find('.');
  const std::string whole = text.substr(0, point), fraction = point == std::string::npos ? "" : text.substr(point + 1);
  auto digits = [](const std::string& s) { return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }); };
  if (whole.empty() || !digits(whole) || !digits(fraction) || fraction.size() > 3) return std::nullopt;
  if (point != std::string::npos && fraction.empty()) return std::nullopt;
  if (whole.size() > 12) return INT64_MAX;
  return std::stoll(whole) * 1000 + std::stoll((fraction + "000").substr(0, 3));
}

// Thousandths of a CPU in a JSON number; none when it has more than 3 decimals.
std::optional<int64_t> number_millis(const json& value) {
  if (value.is_number_integer()) {
    const int64_t whole = whole_number(value);
    return whole > INT64_MAX / 1000 ? INT64_MAX : whole < INT64_MIN / 1000 ? INT64_MIN : whole * 1000;
  }
  const double millis = value.get<double>() * 1000;
  if (std::fabs(millis) > 1e15) return millis > 0 ? INT64_MAX : INT64_MIN;
  const double rounded = std::round(millis);
  if (std::fabs(millis - rounded) > 1e-6 * std::max(1.0, std::fabs(millis))) return std::nullopt;
  return static_cast<int64_t>(rounded);
}

// A CPU bound: "1.5" or 1.5 CPUs, as thousandths of a CPU.
Status parse_cpus(const json& value, int64_t* out) {
  const std::string fix = "ask for a number of CPUs with at most 3 decimals between " + format_cpus(kMinCpuMillis) +
                          " and " + format_cpus(kMaxCpuMillis) + ", e.g. \"1.5\"";
  std::optional<int64_t> millis;
  if (value.is_string()) {
    millis = decimal_millis(value.get<std::string>());
  } else if (value.is_number()) {
    millis = number_millis(value);
  } else {
    return invalid("cpus", "cpus must be a number of CPUs such as \"1.5\", not " + std::string(value.type_name()), fix);
  }
  const std::string given = value.is_string() ? value.get<std::string>() : value.dump();
  if (!millis) return invalid("cpus", "cpus: '" + given + "' is not a positive decimal with at most 3 decimals", fix);
  if (*millis < kMinCpuMillis || *millis > kMaxCpuMillis)
    return invalid("cpus",
                   "cpus of " + given + " is outside " + format_cpus(kMinCpuMillis) + ".." + format_cpus(kMaxCpuMillis),
                   fix);
  *out = *millis;
  return Status::ok();
}

Status parse_gpu(const json& value, GpuRequest* out) {
  if (value.is_null()) return Status::ok();
  Fields gpu(value, "gpu");
  EDT_RETURN_IF_ERROR(gpu.only(api::fields::GpuRequest::kProperties));
  EDT_RETURN_IF_ERROR(gpu.text("model", &out->model, Presence::kOptional));
  if (gpu.has("count")) {
    int64_t count = 0;
    EDT_RETURN_IF_ERROR(gpu.integer("count", &count, Presence::kRequired));
    if (count < 0 || count > kMaxGpusPerContainer)
      return invalid("gpu.count", "gpu.count must be a whole number from 0 to " + std::to_string(kMaxGpusPerContainer),
                           "ask for the GPUs per container, e.g. 1");
    out->count = static_cast<int>(count);
  } else if (!out->model.empty()) {
    out->count = 1;
  }
  if (out->count > 0 && out->model.empty())
    return invalid("gpu.model", "gpu.count is " + std::to_string(out->count) + " but no gpu.model is given",
                         "name the model, e.g. \"NVIDIA-P4\" (see GET /api/v1/gpus)");
  if (out->count == 0) out->model.clear();
  return Status::ok();
}

// A list of mounts (the caller checked it is a list).
Status parse_mounts(const json& value, std::vector<Mount>* out) {
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string at = "mounts[" + std::to_string(i) + "]";
    Fields m(value[i], at);
    EDT_RETURN_IF_ERROR(m.only(api::fields::Mount::kProperties));
    Mount mount;
    EDT_RETURN_IF_ERROR(m.text("volume", &mount.volume, Presence::kRequired));
    if (mount.volume.empty())
      return invalid(at + ".volume", at + ".volume is empty", "name a volume (see GET /api/v1/volumes)");
    EDT_RETURN_IF_ERROR(m.text("path", &mount.path, Presence::kOptional));
    if (mount.path.empty()) mount.path = "/root/" + mount.volume;
    EDT_RETURN_IF_ERROR(check_mount_path(mount.path, at + ".path"));
    EDT_RETURN_IF_ERROR(m.boolean("read_only", &mount.read_only, Presence::kOptional));
    for (const auto& other : *out) {
      if (path_within(mount.path, other.path) || path_within(other.path, mount.path))
        return invalid(at + ".path", at + ".path " + mount.path + " overlaps the mount at " + other.path,
                             "give each volume its own path");
    }
    out->push_back(mount);
  }
  return Status::ok();
}


// Variables (the caller checked it is an object).
Status parse_env(const json& value, std::map<std::string, std::string>* out) {
  if (value.size() > api::limits::Env::max_properties)
    return invalid("env", "env has " + std::to_string(value.size()) + " variables, more than " +
                              std::to_string(api::limits::Env::max_properties),
                   "set at most " + std::to_string(api::limits::Env::max_properties) + " variables");
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string& key = it.key();
    EDT_RETURN_IF_ERROR(check_env_name(key));
    if (!it.value().is_string())
      return Fields::wrong_type("env." + key, it.value(), "a string", "\"INFO\", in quotes");
    EDT_RETURN_IF_ERROR(check_env_value(key, it.value().get_ref<const std::string&>()));
    (*out)[key] = it.value().get<std::string>();
  }
  return Status::ok();
}


}  // namespace

Status check_container_count(const json& value, const std::string& field, int* out) {
  if (!value.is_number_integer())
    return Fields::wrong_type(field, value, "a whole number", "2 or more, without quotes");
  const int64_t n = whole_number(value);
  if (n < kMinContainers)
    return invalid(field, field + " is " + std::to_string(n) + ", fewer than " + std::to_string(kMinContainers),
                         "ask for at least 2 containers: one launcher and one worker");
  if (n > kMaxContainers)
    return invalid(field, field + " is " + value.dump() + ", more than " + std::to_string(kMaxContainers),
                         "ask for at most " + std::to_string(kMaxContainers) + " containers");
  *out = static_cast<int>(n);
  return Status::ok();
}

Status parse_drain_timeout(const json& value, const std::string& field, std::chrono::milliseconds* out) {
  const std::string fix = "write a duration from 0s to " + format_duration(kMaxDrainTimeout) + ", e.g. \"60s\" or \"2m\"";
  if (value.is_number_integer()) {
    const int64_t seconds = whole_number(value);
    if (seconds < 0) return invalid(field, field + " is negative (" + value.dump() + " s)", fix);
    if (seconds > kMaxDrainTimeout.count() / 1000)
      return invalid(field, field + " of " + value.dump() + " s is longer than " + format_duration(kMaxDrainTimeout), fix);
    *out = std::chrono::seconds(seconds);
    return Status::ok();
  }
  if (!value.is_string())
    return invalid(field, field + " must be a duration such as \"60s\", not " + std::string(value.type_name()), fix);
  const std::string text = value.get<std::string>();
  if (!text.empty() && text.front() == '-') return invalid(field, field + " is negative ('" + text + "')", fix);
  auto duration = parse_duration(text);
  if (!duration.is_ok()) return invalid(field, field + ": " + duration.status().message(), fix);
  if (*duration > kMaxDrainTimeout)
    return invalid(field, field + " of '" + text + "' is longer than " + format_duration(kMaxDrainTimeout), fix);
  *out = *duration;
  return Status::ok();
}

std::string format_cpus(int64_t millis) {
  std::string fraction = std::to_string(1000 + millis % 1000).substr(1);  // 3 digits
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  return std::to_string(millis / 1000) + (fraction.empty() ? "" : "." + fraction);
}

std::string format_duration(std::chrono::milliseconds duration) {
  const int64_t ms = duration.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s" : std::to_string(ms) + "ms";
}

namespace {

// spec.megatron from the request's "megatron": {tensor_parallel?, pipeline_parallel?}.
Status parse_megatron(const json& value, ClusterSpec* spec) {
  if (value.is_null()) return Status::ok();
  Fields megatron(value, "megatron");
  EDT_RETURN_IF_ERROR(megatron.only(api::fields::MegatronParallel::kProperties));
  const std::pair<const char*, int*> sizes[] = {{"tensor_parallel", &spec->megatron.tensor_parallel},
                                                {"pipeline_parallel", &spec->megatron.pipeline_parallel}};
  for (const auto& [key, out] : sizes) {
    if (!megatron.has(key)) continue;
    const std::string field = std::string("megatron.") + key;
    int64_t size = 0;
    EDT_RETURN_IF_ERROR(megatron.integer(key, &size, Presence::kRequired));
    if (size < 1 || size > kMaxParallelSize)
      return invalid(field, field + " must be a whole number from 1 to " + std::to_string(kMaxParallelSize) +
                                ", not " + std::to_string(size),
                     "give the degree the job will use, e.g. 2");
    *out = static_cast<int>(size);
  }
  if (spec->megatron.given() && spec->framework != "megatron")
    return invalid("megatron", "megatron parallel sizes are given for a " + spec->framework + " cluster",
                   "drop 'megatron', or make the cluster with framework megatron");
  return check_megatron_parallel(*spec, spec->containers, "megatron");
}

Status check_framework(const std::string& framework) {
  const auto& frameworks = known_frameworks();
  if (std::find(frameworks.begin(), frameworks.end(), framework) == frameworks.end())
    return invalid("framework", "unknown framework '" + framework + "'", "choose one of: " + comma_list(frameworks));
  return Status::ok();
}

// The spec's optional parts: image, gpu, shm, memory, cpus, mounts, env, drain_timeout.
Status parse_cluster_options(const Fields& body, const json& object, ClusterSpec* spec) {
  EDT_RETURN_IF_ERROR(body.text("image", &spec->image, Presence::kOptional));
  if (spec->image.empty()) spec->image = "edt";
  if (body.has("gpu"))
    EDT_RETURN_IF_ERROR(parse_gpu(object["gpu"], &spec->gpu));
  if (body.has("shm"))
    EDT_RETURN_IF_ERROR(parse_bytes(object["shm"], "shm", kMinShmBytes, kMaxShmBytes, &spec->shm_bytes));
  if (body.has("memory") && !object["memory"].is_null())
    EDT_RETURN_IF_ERROR(parse_bytes(object["memory"], "memory", kMinMemoryBytes, kMaxMemoryBytes, &spec->memory_bytes));
  EDT_RETURN_IF_ERROR(check_memory(*spec));
  if (body.has("cpus") && !object["cpus"].is_null())
    EDT_RETURN_IF_ERROR(parse_cpus(object["cpus"], &spec->cpu_millis));
  const json* mounts = nullptr;
  EDT_RETURN_IF_ERROR(body.array("mounts", &mounts, Presence::kOptional));
  if (mounts)
    EDT_RETURN_IF_ERROR(parse_mounts(*mounts, &spec->mounts));
  const json* env = nullptr;
  EDT_RETURN_IF_ERROR(body.object("env", &env, Presence::kOptional));
  if (env)
    EDT_RETURN_IF_ERROR(parse_env(*env, &spec->env));
  if (body.has("drain_timeout"))
    EDT_RETURN_IF_ERROR(parse_drain_timeout(object["drain_timeout"], "drain_timeout", &spec->drain_timeout));
  if (body.has("megatron"))
    EDT_RETURN_IF_ERROR(parse_megatron(object["megatron"], spec));
  return Status::ok();
}

// The scheduler's part of a spec: "priority", and the elastic bounds
// "min_containers" (default: containers) and "max_containers", which make
// the cluster elastic; containers must lie between them.
Status parse_scheduling(const Fields& body, const json& object, ClusterSpec* spec) {
  if (body.has("priority")) {
    int64_t priority = 0;
    EDT_RETURN_IF_ERROR(body.integer("priority", &priority, Presence::kRequired));
    if (priority < kMinPriority || priority > kMaxPriority)
      return invalid("priority", "priority must be a whole number from " + std::to_string(kMinPriority) + " to " +
                                     std::to_string(kMaxPriority) + ", not " + std::to_string(priority),
                     "give a priority in that range; higher is served first (default 0)");
    spec->priority = static_cast<int>(priority);
  }
  if (!body.has("min_containers") && !body.has("max_containers")) return Status::ok();
  if (!body.has("max_containers"))
    return invalid("max_containers", "min_containers is given without max_containers",
                   "give max_containers too, to make the cluster elastic");
  ElasticBounds bounds{spec->containers, 0};
  if (body.has("min_containers"))
    EDT_RETURN_IF_ERROR(check_container_count(object["min_containers"], "min_containers", &bounds.min));
  EDT_RETURN_IF_ERROR(check_container_count(object["max_containers"], "max_containers", &bounds.max));
  EDT_RETURN_IF_ERROR(check_elastic_bounds(bounds, spec->containers, "containers"));
  spec->elastic = bounds;
  return Status::ok();
}

}  // namespace

Status check_elastic_bounds(const ElasticBounds& bounds, int containers, const std::string& field) {
  if (!bounds.elastic()) return Status::ok();
  const std::string range = std::to_string(bounds.min) + ".." + std::to_string(bounds.max);
  if (bounds.min > bounds.max)
    return invalid("min_containers", "min_containers " + std::to_string(bounds.min) + " is more than max_containers " +
                                         std::to_string(bounds.max),
                   "give min_containers <= max_containers");
  if (containers < bounds.min || containers > bounds.max)
    return invalid(field, field + " is " + std::to_string(containers) + ", outside the elastic bounds " + range,
                   "ask for a size from " + range + " (the scheduler grows and shrinks the cluster within them)");
  return Status::ok();
}

Status parse_cluster_spec(const json& object, ClusterSpec* out) {
  Fields body(object, "");
  EDT_RETURN_IF_ERROR(body.only(api::fields::ClusterSpec::kProperties));
  ClusterSpec spec;
  EDT_RETURN_IF_ERROR(body.text("name", &spec.name, Presence::kRequired));
  EDT_RETURN_IF_ERROR(check_cluster_name(spec.name));
  EDT_RETURN_IF_ERROR(body.text("framework", &spec.framework, Presence::kRequired));
  EDT_RETURN_IF_ERROR(check_framework(spec.framework));
  if (!body.has("containers"))
    return invalid("containers", "'containers' is missing", "ask for 2 or more containers, e.g. 2");
  EDT_RETURN_IF_ERROR(check_container_count(object["containers"], "containers", &spec.containers));
  EDT_RETURN_IF_ERROR(parse_cluster_options(body, object, &spec));
  EDT_RETURN_IF_ERROR(parse_scheduling(body, object, &spec));
  *out = std::move(spec);
  return Status::ok();
}

Status parse_scale_request(const json& object, ScaleRequest* out) {
  Fields body(object, "");
  const auto& scalable = api::fields::Scale::kProperties;
  if (object.is_object()) {
    for (const auto& field : api::fields::ClusterSpec::kProperties)
      if (body.has(field) && std::find(scalable.begin(), scalable.end(), field) == scalable.end())
        return invalid(std::string(field), "field '" + std::string(field) + "' cannot be changed",
                       "only containers and drain_timeout can be changed; make a new cluster for the rest");
  }
  EDT_RETURN_IF_ERROR(body.only(scalable));
  if (!body.has("containers")) return invalid("containers", "'containers' is missing", "send {\"containers\": N}");
  EDT_RETURN_IF_ERROR(check_container_count(object["containers"], "containers", &out->containers));
  if (!body.has("drain_timeout")) return Status::ok();
  std::chrono::milliseconds timeout{};
  EDT_RETURN_IF_ERROR(parse_drain_timeout(object["drain_timeout"], "drain_timeout", &timeout));
  out->drain_timeout = timeout;
  return Status::ok();
}

json spec_to_json(const ClusterSpec& spec) {
  json mounts = json::array();
  for (const auto& m : spec.mounts) mounts.push_back({{"volume", m.volume}, {"path", m.path}, {"read_only", m.read_only}});
  json j = {{"name", spec.name},         {"framework", spec.framework},     {"containers", spec.containers},
            {"image", spec.image},       {"shm", format_size(spec.shm_bytes)}, {"mounts", mounts},
            {"env", spec.env},           {"drain_timeout", format_duration(spec.drain_timeout)}};
  j["gpu"] = spec.gpu.count > 0 ? json{{"model", spec.gpu.model}, {"count", spec.gpu.count}} : json(nullptr);
  j["memory"] = spec.memory_bytes > 0 ? json(format_size(spec.memory_bytes)) : json(nullptr);
  j["cpus"] = spec.cpu_millis > 0 ? json(format_cpus(spec.cpu_millis)) : json(nullptr);
  j["priority"] = spec.priority;
  if (spec.elastic.elastic()) {
    j["min_containers"] = spec.elastic.min;
    j["max_containers"] = spec.elastic.max;
  }
  if (spec.megatron.given()) {
    json m = json::object();
    if (spec.megatron.tensor_parallel > 0) m["tensor_parallel"] = spec.megatron.tensor_parallel;
    if (spec.megatron.pipeline_parallel > 0) m["pipeline_parallel"] = spec.megatron.pipeline_parallel;
    j["megatron"] = m;
  }
  return j;
}

json container_to_json(const ContainerStatus& c) {
  json j = {{"name", c.name},       {"role", c.role()},       {"index", c.index},     {"phase", to_string(c.phase)},
            {"message", c.message}, {"hostname", c.name},     {"address", c.address}, {"gpus", c.gpus},
            {"started_at", c.started_at}};
  if (c.slurm_job != 0) {
    j["node"] = c.node;
    j["slurm_job"] = c.slurm_job;
  }
  return j;
}

json cluster_to_json(const Cluster& cluster) {
  json containers = json::array();
  for (const auto& c : cluster.containers) containers.push_back(container_to_json(c));
  json j = spec_to_json(cluster.spec);
  j["owner"] = cluster.owner;
  j["team"] = cluster.team;
  j["created_at"] = cluster.created_at;
  j["status"] = {{"phase", to_string(cluster.phase)}, {"message", cluster.message}, {"containers", containers}};
  const QueuedRequest& q = cluster.queued;
  j["status"]["queued"] = q.waiting() ? json{{"containers", q.containers},
                                             {"position", std::max(q.position, 1)},
                                             {"reason", q.reason},
                                             {"since", q.since_ms}}
                                      : json(nullptr);
  return j;
}

json event_to_json(const ClusterEvent& e) {
  char time[32];
  std::time_t seconds = static_cast<std::time_t>(e.time_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  std::strftime(time, sizeof(time), "%Y-%m-%dT%H:%M:%S", &utc);
  char full[48];
  std::snprintf(full, sizeof(full), "%s.%03dZ", time, static_cast<int>(e.time_ms % 1000));
  return {{"time", full}, {"type", to_string(e.type)}, {"message", e.message}};
}

}  // namespace edt::control
