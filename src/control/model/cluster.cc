#include "control/model/cluster.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "common/units.h"
#include "control/model/fields.h"

namespace edt::control {

using nlohmann::json;

Error error_from_status(const Status& st, const std::string& field) {
  switch (st.code()) {
    case StatusCode::kNotFound: return missing(field, st.message(), "check the name");
    case StatusCode::kAlreadyExists: return conflict(field, st.message(), "choose another name");
    case StatusCode::kFailedPrecondition: return conflict(field, st.message(), "wait, or change what it depends on");
    case StatusCode::kInvalidArgument: return invalid(field, st.message(), "correct the value");
    default: return {Error::Kind::kInternal, field, st.message(), "retry; if it persists, see edtd's log"};
  }
}

const std::vector<std::string>& known_frameworks() {
  static const std::vector<std::string> kFrameworks(api::limits::Framework::values.begin(),
                                                    api::limits::Framework::values.end());
  return kFrameworks;
}

std::string container_name(const std::string& cluster, int index) {
  if (index == 0) return cluster + "-launcher";
  return cluster + "-worker-" + std::to_string(index - 1);
}

namespace {

bool is_dns_label(const std::string& s, size_t max_length) {
  if (s.empty() || s.size() > max_length) return false;
  auto ok = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; };
  if (!std::all_of(s.begin(), s.end(), ok)) return false;
  return s.front() != '-' && s.back() != '-';
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// The system directories of a container; a mount may not cover them.
const std::vector<std::string>& system_directories() {
  static const std::vector<std::string> kDirs = {"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64",
                                                 "/proc", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var", "/job"};
  return kDirs;
}

// A JSON integer as int64_t; one above INT64_MAX (JSON reads it as
// unsigned) as INT64_MAX, so that range checks see it as too large rather
// than wrapped to a negative number.
int64_t whole_number(const json& value) {
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return INT64_MAX;
  return value.get<int64_t>();
}

bool is_under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

// A size (bytes, or a number with a unit) between `min` and `max`.
Refusal parse_bytes(const json& value, const std::string& field, uint64_t min, uint64_t max, uint64_t* out) {
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
  return std::nullopt;
}

// A memory bound must hold /dev/shm and the container's processes.
Refusal check_memory(const ClusterSpec& spec) {
  if (spec.memory_bytes == 0 || spec.memory_bytes >= spec.shm_bytes + kMemoryHeadroomBytes) return std::nullopt;
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
Refusal parse_cpus(const json& value, int64_t* out) {
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
  return std::nullopt;
}

Refusal parse_gpu(const json& value, GpuRequest* out) {
  if (value.is_null()) return std::nullopt;
  Fields gpu(value, "gpu");
  if (auto r = gpu.only(api::fields::GpuRequest::kProperties)) return r;
  if (auto r = gpu.text("model", &out->model, Presence::kOptional)) return r;
  if (gpu.has("count")) {
    int64_t count = 0;
    if (auto r = gpu.integer("count", &count, Presence::kRequired)) return r;
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
  return std::nullopt;
}

// A list of mounts (the caller checked it is a list).
Refusal parse_mounts(const json& value, std::vector<Mount>* out) {
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string at = "mounts[" + std::to_string(i) + "]";
    Fields m(value[i], at);
    if (auto r = m.only(api::fields::Mount::kProperties)) return r;
    Mount mount;
    if (auto r = m.text("volume", &mount.volume, Presence::kRequired)) return r;
    if (mount.volume.empty())
      return invalid(at + ".volume", at + ".volume is empty", "name a volume (see GET /api/v1/volumes)");
    if (auto r = m.text("path", &mount.path, Presence::kOptional)) return r;
    if (mount.path.empty()) mount.path = "/root/" + mount.volume;
    if (auto r = check_mount_path(mount.path, at + ".path")) return r;
    if (auto r = m.boolean("read_only", &mount.read_only, Presence::kOptional)) return r;
    for (const auto& other : *out) {
      if (is_under(mount.path, other.path) || is_under(other.path, mount.path))
        return invalid(at + ".path", at + ".path " + mount.path + " overlaps the mount at " + other.path,
                             "give each volume its own path");
    }
    out->push_back(mount);
  }
  return std::nullopt;
}

// The first character of `text` that is a control character (C0 or DEL)
// or in `also`, or npos.
size_t first_forbidden(const std::string& text, std::string_view also) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || also.find(text[i]) != std::string_view::npos) return i;
  }
  return std::string::npos;
}

// How a refused character reads in a message.
std::string describe_char(char c) {
  switch (c) {
    case '\n': return "a newline";
    case '\t': return "a tab";
    case '\0': return "a NUL";
    case '"': return "'\"'";
    case '\\': return "'\\'";
    default: {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", static_cast<unsigned char>(c));
      return std::string("the control character ") + hex;
    }
  }
}

Refusal check_env_name(const std::string& key) {
  const bool ok = !key.empty() && key.size() <= api::limits::Env::key_max_length &&
                  !std::isdigit(static_cast<unsigned char>(key[0])) &&
                  std::all_of(key.begin(), key.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  if (!ok)
    return invalid("env." + key, "'" + key + "' is not a variable name",
                   "use 1 to " + std::to_string(api::limits::Env::key_max_length) +
                       " letters, digits and _ (not first a digit)");
  return std::nullopt;
}

// A value goes into sshd's configuration and into shells' environments:
// what either would read otherwise than written is refused.
Refusal check_env_value(const std::string& key, const std::string& value) {
  const std::string field = "env." + key;
  if (value.size() > api::limits::EnvValue::max_length)
    return invalid(field, field + " is " + std::to_string(value.size()) + " bytes, more than " +
                              std::to_string(api::limits::EnvValue::max_length),
                   "pass a longer value in a file on a volume instead");
  if (size_t at = first_forbidden(value, "\"\\"); at != std::string::npos)
    return invalid(field, field + " has " + describe_char(value[at]) + " at byte " + std::to_string(at),
                   "leave out control characters, '\"' and '\\' (a file on a volume can hold any text)");
  return std::nullopt;
}

// Variables (the caller checked it is an object).
Refusal parse_env(const json& value, std::map<std::string, std::string>* out) {
  if (value.size() > api::limits::Env::max_properties)
    return invalid("env", "env has " + std::to_string(value.size()) + " variables, more than " +
                              std::to_string(api::limits::Env::max_properties),
                   "set at most " + std::to_string(api::limits::Env::max_properties) + " variables");
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string& key = it.key();
    if (auto r = check_env_name(key)) return r;
    if (!it.value().is_string())
      return Fields::wrong_type("env." + key, it.value(), "a string", "\"INFO\", in quotes");
    if (auto r = check_env_value(key, it.value().get_ref<const std::string&>())) return r;
    (*out)[key] = it.value().get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

Refusal check_cluster_name(const std::string& name, const std::string& field) {
  if (!is_dns_label(name, kMaxClusterNameLength))
    return invalid(field, "'" + name + "' is not a valid cluster name",
                         "use 1 to " + std::to_string(kMaxClusterNameLength) +
                             " lower-case letters, digits and '-', not starting or ending with '-' (e.g. tthvd)");
  return std::nullopt;
}

Refusal check_resource_name(const std::string& name, const std::string& field, const std::string& what) {
  if (!is_dns_label(name, 63))
    return invalid(field, "'" + name + "' is not a valid " + what + " name",
                         "use lower-case letters, digits and '-', not starting or ending with '-'");
  return std::nullopt;
}

Refusal check_container_count(const json& value, const std::string& field, int* out) {
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
  return std::nullopt;
}

Refusal check_mount_path(const std::string& path, const std::string& field) {
  const std::string fix = "use an absolute path such as /root/data, without '.', '..' or '//'";
  if (path.empty() || path[0] != '/') return invalid(field, field + " '" + path + "' is not absolute", fix);
  if (path.size() > api::limits::MountPath::max_length)
    return invalid(field, field + " is " + std::to_string(path.size()) + " bytes, more than " +
                              std::to_string(api::limits::MountPath::max_length) + " (PATH_MAX)",
                   "use a shorter path");
  if (size_t at = first_forbidden(path, ""); at != std::string::npos)
    return invalid(field, field + " has " + describe_char(path[at]) + " at byte " + std::to_string(at), fix);
  if (path.size() > 1 && path.back() == '/')
    return invalid(field, field + " '" + path + "' is not normalised (trailing '/')", fix);
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      return invalid(field, field + " '" + path + "' is not normalised (it has '" + (part.empty() ? "//" : part) + "')", fix);
    start = end + 1;
  }
  if (path == "/" || path == "/root")
    return invalid(field, field + " '" + path + "' would cover the container's " + (path == "/" ? "root" : "home"),
                         "mount below it, e.g. /root/data");
  for (const auto& dir : system_directories()) {
    if (is_under(path, dir) || is_under(dir, path))
      return invalid(field, field + " '" + path + "' covers the system directory " + dir,
                           "mount somewhere else, e.g. /root/data or /data");
  }
  return std::nullopt;
}

Refusal parse_drain_timeout(const json& value, const std::string& field, std::chrono::milliseconds* out) {
  const std::string fix = "write a duration from 0s to " + format_duration(kMaxDrainTimeout) + ", e.g. \"60s\" or \"2m\"";
  if (value.is_number_integer()) {
    const int64_t seconds = whole_number(value);
    if (seconds < 0) return invalid(field, field + " is negative (" + value.dump() + " s)", fix);
    if (seconds > kMaxDrainTimeout.count() / 1000)
      return invalid(field, field + " of " + value.dump() + " s is longer than " + format_duration(kMaxDrainTimeout), fix);
    *out = std::chrono::seconds(seconds);
    return std::nullopt;
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
  return std::nullopt;
}

Refusal check_megatron_parallel(const ClusterSpec& spec, int containers, const std::string& field) {
  if (!spec.megatron.given()) return std::nullopt;
  const int per_container = std::max(spec.gpu.count, 1);
  const int gpus = containers * per_container;
  const int model = spec.megatron.product();
  if (gpus % model == 0) return std::nullopt;
  std::string fits;
  for (int n = kMinContainers, found = 0; n <= kMaxContainers && found < 3; ++n)
    if (n * per_container % model == 0) fits += (found++ ? ", " : "") + std::to_string(n);
  const std::string sizes = "tensor_parallel " + std::to_string(std::max(spec.megatron.tensor_parallel, 1)) +
                            " x pipeline_parallel " + std::to_string(std::max(spec.megatron.pipeline_parallel, 1));
  return invalid(field,
                 std::to_string(containers) + " containers of " + std::to_string(per_container) + " GPU" +
                     (per_container == 1 ? "" : "s") + " make " + std::to_string(gpus) + " GPUs, which " + sizes +
                     " = " + std::to_string(model) + " does not divide",
                 fits.empty() ? "choose smaller parallel sizes or more GPUs per container"
                              : "ask for a container count such as " + fits + ", or other parallel sizes");
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
Refusal parse_megatron(const json& value, ClusterSpec* spec) {
  if (value.is_null()) return std::nullopt;
  Fields megatron(value, "megatron");
  if (auto r = megatron.only(api::fields::MegatronParallel::kProperties)) return r;
  const std::pair<const char*, int*> sizes[] = {{"tensor_parallel", &spec->megatron.tensor_parallel},
                                                {"pipeline_parallel", &spec->megatron.pipeline_parallel}};
  for (const auto& [key, out] : sizes) {
    if (!megatron.has(key)) continue;
    const std::string field = std::string("megatron.") + key;
    int64_t size = 0;
    if (auto r = megatron.integer(key, &size, Presence::kRequired)) return r;
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

Refusal check_framework(const std::string& framework) {
  const auto& frameworks = known_frameworks();
  if (std::find(frameworks.begin(), frameworks.end(), framework) == frameworks.end())
    return invalid("framework", "unknown framework '" + framework + "'", "choose one of: " + join(frameworks, ", "));
  return std::nullopt;
}

// The spec's optional parts: image, gpu, shm, memory, cpus, mounts, env, drain_timeout.
Refusal parse_cluster_options(const Fields& body, const json& object, ClusterSpec* spec) {
  if (auto r = body.text("image", &spec->image, Presence::kOptional)) return r;
  if (spec->image.empty()) spec->image = "edt";
  if (body.has("gpu"))
    if (auto r = parse_gpu(object["gpu"], &spec->gpu)) return r;
  if (body.has("shm"))
    if (auto r = parse_bytes(object["shm"], "shm", kMinShmBytes, kMaxShmBytes, &spec->shm_bytes)) return r;
  if (body.has("memory") && !object["memory"].is_null())
    if (auto r = parse_bytes(object["memory"], "memory", kMinMemoryBytes, kMaxMemoryBytes, &spec->memory_bytes))
      return r;
  if (auto r = check_memory(*spec)) return r;
  if (body.has("cpus") && !object["cpus"].is_null())
    if (auto r = parse_cpus(object["cpus"], &spec->cpu_millis)) return r;
  const json* mounts = nullptr;
  if (auto r = body.array("mounts", &mounts, Presence::kOptional)) return r;
  if (mounts)
    if (auto r = parse_mounts(*mounts, &spec->mounts)) return r;
  const json* env = nullptr;
  if (auto r = body.object("env", &env, Presence::kOptional)) return r;
  if (env)
    if (auto r = parse_env(*env, &spec->env)) return r;
  if (body.has("drain_timeout"))
    if (auto r = parse_drain_timeout(object["drain_timeout"], "drain_timeout", &spec->drain_timeout)) return r;
  if (body.has("megatron"))
    if (auto r = parse_megatron(object["megatron"], spec)) return r;
  return std::nullopt;
}

}  // namespace

Refusal parse_cluster_spec(const json& object, ClusterSpec* out) {
  Fields body(object, "");
  if (auto r = body.only(api::fields::ClusterSpec::kProperties)) return r;
  ClusterSpec spec;
  if (auto r = body.text("name", &spec.name, Presence::kRequired)) return r;
  if (auto r = check_cluster_name(spec.name)) return r;
  if (auto r = body.text("framework", &spec.framework, Presence::kRequired)) return r;
  if (auto r = check_framework(spec.framework)) return r;
  if (!body.has("containers"))
    return invalid("containers", "'containers' is missing", "ask for 2 or more containers, e.g. 2");
  if (auto r = check_container_count(object["containers"], "containers", &spec.containers)) return r;
  if (auto r = parse_cluster_options(body, object, &spec)) return r;
  *out = std::move(spec);
  return std::nullopt;
}

Refusal parse_scale_request(const json& object, ScaleRequest* out) {
  Fields body(object, "");
  const auto& scalable = api::fields::Scale::kProperties;
  if (object.is_object()) {
    for (const auto& field : api::fields::ClusterSpec::kProperties)
      if (body.has(field) && std::find(scalable.begin(), scalable.end(), field) == scalable.end())
        return invalid(std::string(field), "field '" + std::string(field) + "' cannot be changed",
                       "only containers and drain_timeout can be changed; make a new cluster for the rest");
  }
  if (auto r = body.only(scalable)) return r;
  if (!body.has("containers")) return invalid("containers", "'containers' is missing", "send {\"containers\": N}");
  if (auto r = check_container_count(object["containers"], "containers", &out->containers)) return r;
  if (!body.has("drain_timeout")) return std::nullopt;
  std::chrono::milliseconds timeout{};
  if (auto r = parse_drain_timeout(object["drain_timeout"], "drain_timeout", &timeout)) return r;
  out->drain_timeout = timeout;
  return std::nullopt;
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
  j["created_at"] = cluster.created_at;
  j["status"] = {{"phase", to_string(cluster.phase)}, {"message", cluster.message}, {"containers", containers}};
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

std::map<std::string, std::string> container_env(const ClusterSpec& spec, const ContainerStatus& container,
                                                 const std::map<std::string, std::string>& base) {
  std::map<std::string, std::string> env = base;
  env["HOME"] = "/root";
  env["USER"] = "root";
  env["EDT_CLUSTER"] = spec.name;
  env["EDT_CONTAINER"] = container.name;
  env["EDT_FRAMEWORK"] = spec.framework;
  std::string devices;
  for (int gpu : container.gpus) devices += (devices.empty() ? "" : ",") + std::to_string(gpu);
  env["CUDA_VISIBLE_DEVICES"] = devices;
  if (spec.framework == "deepspeed") {
    // DeepSpeed's launcher starts every node with pdsh; over ssh, as on
    // the sites it was written for (rsh is pdsh's own default).
    env["PDSH_RCMD_TYPE"] = "ssh";
    // A bare `pdsh CMD` runs on every container: pdsh's host list file
    // wants names alone, not the hostfile's "name slots=N".
    env["WCOLL"] = "/job/hostnames";
    // Its OpenMPI runner calls mpirun without --allow-run-as-root, and a
    // container's user is root.
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
  }
  if (spec.framework == "megatron") {
    // torchrun's arguments as Megatron-LM's example scripts name them. No
    // NNODES here: this environment is fixed when a container starts and
    // a scale would leave it wrong in the others; `edtrun --per-host`
    // gives it (and a free MASTER_PORT) from the hostfile of the moment.
    env["MASTER_ADDR"] = container_name(spec.name, 0);
    env["MASTER_PORT"] = "6000";
    env["NODE_RANK"] = std::to_string(container.index);
    env["GPUS_PER_NODE"] = std::to_string(container.gpus.empty() ? 1 : container.gpus.size());
    // Megatron-LM orders its overlapped communication and computation on
    // one CUDA stream connection; its scripts all set this.
    env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1";
  }
  for (const auto& [key, value] : spec.env) env[key] = value;
  return env;
}

std::vector<ContainerStatus> running_containers(const std::vector<ContainerStatus>& containers) {
  std::vector<ContainerStatus> running;
  for (const auto& c : containers)
    if (!c.leaving && c.phase == Phase::kRunning) running.push_back(c);
  return running;
}

std::string render_hostfile(const std::vector<ContainerStatus>& containers) {
  std::vector<const ContainerStatus*> sorted;
  for (const auto& c : containers) sorted.push_back(&c);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->index < b->index; });
  std::string out;
  for (const auto* c : sorted)
    out += c->name + " slots=" + std::to_string(c->gpus.empty() ? 1 : c->gpus.size()) + "\n";
  return out;
}

}  // namespace edt::control
