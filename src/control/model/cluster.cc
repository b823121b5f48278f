#include "control/model/cluster.h"

#include <algorithm>

#include "common/units.h"

namespace edt::control {

using nlohmann::json;

json ApiError::to_json() const {
  return json{{"error", {{"status", http_status}, {"field", field}, {"message", message}, {"fix", fix}}}};
}

const std::vector<std::string>& known_frameworks() {
  static const std::vector<std::string> kFrameworks = {"horovod", "deepspeed", "megatron", "slurm"};
  return kFrameworks;
}

bool Image::carries(const std::string& framework) const {
  return std::find(frameworks.begin(), frameworks.end(), framework) != frameworks.end();
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

// Refuses any key of `object` not in `allowed`.
Refusal check_known_fields(const json& object, const std::string& prefix, const std::vector<std::string>& allowed) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end())
      return unprocessable(prefix + it.key(), "unknown field '" + prefix + it.key() + "'",
                           "remove it; the fields here are: " + join(allowed, ", "));
  }
  return std::nullopt;
}

Refusal want_string(const json& body, const std::string& key, const std::string& field, std::string* out) {
  if (!body.contains(key)) return std::nullopt;
  if (!body[key].is_string())
    return unprocessable(field, "'" + field + "' must be a string, not " + std::string(body[key].type_name()),
                         "write it in quotes");
  *out = body[key].get<std::string>();
  return std::nullopt;
}

// The system directories of a container; a mount may not cover them.
const std::vector<std::string>& system_directories() {
  static const std::vector<std::string> kDirs = {"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64",
                                                 "/proc", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var", "/job"};
  return kDirs;
}

bool is_under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

Refusal parse_shm(const json& value, uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<uint64_t>();
  } else if (value.is_string()) {
    auto size = parse_size(value.get<std::string>());
    if (!size.is_ok())
      return unprocessable("shm", "shm: " + size.status().message(), "write a size such as \"512M\" or \"2Gi\"");
    *out = size.value();
  } else {
    return unprocessable("shm", "shm must be a size such as \"512M\", not " + std::string(value.type_name()),
                         "write a size such as \"512M\" or \"2Gi\"");
  }
  if (*out < (1ull << 20) || *out > (256ull << 30))
    return unprocessable("shm", "shm of " + std::to_string(*out) + " bytes is outside 1M..256Gi",
                         "ask for a size between 1M and 256Gi, e.g. \"1Gi\"");
  return std::nullopt;
}

Refusal parse_gpu(const json& value, GpuRequest* out) {
  if (value.is_null()) return std::nullopt;
  if (!value.is_object())
    return unprocessable("gpu", "gpu must be an object {\"model\": ..., \"count\": ...}",
                         "write e.g. {\"model\": \"NVIDIA-P4\", \"count\": 1}");
  if (auto r = check_known_fields(value, "gpu.", {"model", "count"})) return r;
  if (auto r = want_string(value, "model", "gpu.model", &out->model)) return r;
  if (value.contains("count")) {
    if (!value["count"].is_number_integer() || value["count"].get<int64_t>() < 0 || value["count"].get<int64_t>() > 16)
      return unprocessable("gpu.count", "gpu.count must be a whole number from 0 to 16",
                           "ask for the GPUs per container, e.g. 1");
    out->count = value["count"].get<int>();
  } else if (!out->model.empty()) {
    out->count = 1;
  }
  if (out->count > 0 && out->model.empty())
    return unprocessable("gpu.model", "gpu.count is " + std::to_string(out->count) + " but no gpu.model is given",
                         "name the model, e.g. \"NVIDIA-P4\" (see GET /api/v1/gpus)");
  if (out->count == 0) out->model.clear();
  return std::nullopt;
}

Refusal parse_mounts(const json& value, std::vector<Mount>* out) {
  if (!value.is_array())
    return unprocessable("mounts", "mounts must be a list", "write e.g. [{\"volume\": \"data\", \"path\": \"/root/data\"}]");
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string at = "mounts[" + std::to_string(i) + "]";
    const json& m = value[i];
    if (!m.is_object())
      return unprocessable(at, at + " must be an object", "write {\"volume\": NAME, \"path\": PATH, \"read_only\": false}");
    if (auto r = check_known_fields(m, at + ".", {"volume", "path", "read_only"})) return r;
    Mount mount;
    if (auto r = want_string(m, "volume", at + ".volume", &mount.volume)) return r;
    if (mount.volume.empty())
      return unprocessable(at + ".volume", at + ".volume is missing", "name a volume (see GET /api/v1/volumes)");
    if (auto r = want_string(m, "path", at + ".path", &mount.path)) return r;
    if (mount.path.empty()) mount.path = "/root/" + mount.volume;
    if (auto r = check_mount_path(mount.path, at + ".path")) return r;
    if (m.contains("read_only")) {
      if (!m["read_only"].is_boolean())
        return unprocessable(at + ".read_only", at + ".read_only must be true or false", "write true or false");
      mount.read_only = m["read_only"].get<bool>();
    }
    for (const auto& other : *out) {
      if (is_under(mount.path, other.path) || is_under(other.path, mount.path))
        return unprocessable(at + ".path", at + ".path " + mount.path + " overlaps the mount at " + other.path,
                             "give each volume its own path");
    }
    out->push_back(mount);
  }
  return std::nullopt;
}

Refusal parse_env(const json& value, std::map<std::string, std::string>* out) {
  if (!value.is_object())
    return unprocessable("env", "env must be an object of strings", "write e.g. {\"NCCL_DEBUG\": \"INFO\"}");
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string& key = it.key();
    bool ok = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0])) &&
              std::all_of(key.begin(), key.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!ok)
      return unprocessable("env." + key, "'" + key + "' is not a variable name",
                           "use letters, digits and _ (not first a digit)");
    if (!it.value().is_string())
      return unprocessable("env." + key, "env." + key + " must be a string", "write the value in quotes");
    (*out)[key] = it.value().get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

Refusal check_cluster_name(const std::string& name, const std::string& field) {
  if (!is_dns_label(name, kMaxClusterNameLength))
    return unprocessable(field, "'" + name + "' is not a valid cluster name",
                         "use 1 to " + std::to_string(kMaxClusterNameLength) +
                             " lower-case letters, digits and '-', not starting or ending with '-' (e.g. tthvd)");
  return std::nullopt;
}

Refusal check_resource_name(const std::string& name, const std::string& field, const std::string& what) {
  if (!is_dns_label(name, 63))
    return unprocessable(field, "'" + name + "' is not a valid " + what + " name",
                         "use lower-case letters, digits and '-', not starting or ending with '-'");
  return std::nullopt;
}

Refusal check_container_count(const json& value, const std::string& field, int* out) {
  if (!value.is_number_integer())
    return unprocessable(field, field + " must be a whole number", "ask for 2 or more containers, e.g. 2");
  int64_t n = value.get<int64_t>();
  if (n < kMinContainers)
    return unprocessable(field, field + " is " + std::to_string(n) + ", fewer than " + std::to_string(kMinContainers),
                         "ask for at least 2 containers: one launcher and one worker");
  if (n > kMaxContainers)
    return unprocessable(field, field + " is " + std::to_string(n) + ", more than " + std::to_string(kMaxContainers),
                         "ask for at most " + std::to_string(kMaxContainers) + " containers");
  *out = static_cast<int>(n);
  return std::nullopt;
}

Refusal check_mount_path(const std::string& path, const std::string& field) {
  const std::string fix = "use an absolute path such as /root/data, without '.', '..' or '//'";
  if (path.empty() || path[0] != '/') return unprocessable(field, field + " '" + path + "' is not absolute", fix);
  if (path.size() > 1 && path.back() == '/')
    return unprocessable(field, field + " '" + path + "' is not normalised (trailing '/')", fix);
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      return unprocessable(field, field + " '" + path + "' is not normalised (it has '" + (part.empty() ? "//" : part) + "')", fix);
    start = end + 1;
  }
  if (path == "/" || path == "/root")
    return unprocessable(field, field + " '" + path + "' would cover the container's " + (path == "/" ? "root" : "home"),
                         "mount below it, e.g. /root/data");
  for (const auto& dir : system_directories()) {
    if (is_under(path, dir) || is_under(dir, path))
      return unprocessable(field, field + " '" + path + "' covers the system directory " + dir,
                           "mount somewhere else, e.g. /root/data or /data");
  }
  return std::nullopt;
}

Refusal parse_cluster_spec(const json& body, ClusterSpec* out) {
  if (!body.is_object())
    return bad_request("", "the request body must be a JSON object", "send {\"name\": ..., \"framework\": ..., \"containers\": ...}");
  if (auto r = check_known_fields(body, "", {"name", "framework", "containers", "image", "gpu", "shm", "mounts", "env"}))
    return r;
  ClusterSpec spec;
  if (!body.contains("name")) return unprocessable("name", "name is missing", "name the cluster, e.g. \"tthvd\"");
  if (auto r = want_string(body, "name", "name", &spec.name)) return r;
  if (auto r = check_cluster_name(spec.name)) return r;
  if (!body.contains("framework"))
    return unprocessable("framework", "framework is missing", "choose one of: " + join(known_frameworks(), ", "));
  if (auto r = want_string(body, "framework", "framework", &spec.framework)) return r;
  const auto& frameworks = known_frameworks();
  if (std::find(frameworks.begin(), frameworks.end(), spec.framework) == frameworks.end())
    return unprocessable("framework", "unknown framework '" + spec.framework + "'",
                         "choose one of: " + join(frameworks, ", "));
  if (!body.contains("containers"))
    return unprocessable("containers", "containers is missing", "ask for 2 or more containers, e.g. 2");
  if (auto r = check_container_count(body["containers"], "containers", &spec.containers)) return r;
  if (auto r = want_string(body, "image", "image", &spec.image)) return r;
  if (spec.image.empty()) spec.image = "edt";
  if (body.contains("gpu"))
    if (auto r = parse_gpu(body["gpu"], &spec.gpu)) return r;
  if (body.contains("shm"))
    if (auto r = parse_shm(body["shm"], &spec.shm_bytes)) return r;
  if (body.contains("mounts"))
    if (auto r = parse_mounts(body["mounts"], &spec.mounts)) return r;
  if (body.contains("env"))
    if (auto r = parse_env(body["env"], &spec.env)) return r;
  *out = std::move(spec);
  return std::nullopt;
}

Refusal check_against_catalog(const ClusterSpec& spec, const Catalog& catalog, int new_containers) {
  auto image = catalog.images.find(spec.image);
  if (image == catalog.images.end()) {
    std::vector<std::string> names;
    for (const auto& [name, _] : catalog.images) names.push_back(name);
    return unprocessable("image", "unknown image '" + spec.image + "'", "choose one of: " + join(names, ", "));
  }
  if (!image->second.carries(spec.framework))
    return unprocessable("image", "image " + spec.image + " carries " + join(image->second.frameworks, ", ") +
                                      ", not " + spec.framework,
                         "choose an image that carries " + spec.framework + " (see GET /api/v1/images)");
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    if (!catalog.volumes.count(spec.mounts[i].volume))
      return unprocessable("mounts[" + std::to_string(i) + "].volume", "unknown volume '" + spec.mounts[i].volume + "'",
                           "create it first: edt volume create " + spec.mounts[i].volume);
  }
  if (spec.gpu.count > 0) {
    auto total = catalog.gpus_total.find(spec.gpu.model);
    if (total == catalog.gpus_total.end()) {
      std::vector<std::string> models;
      for (const auto& [model, _] : catalog.gpus_total) models.push_back(model);
      return unprocessable("gpu.model", "unknown GPU model '" + spec.gpu.model + "'",
                           models.empty() ? "this machine has no GPUs; leave gpu out"
                                          : "choose one of: " + join(models, ", "));
    }
    int free = catalog.gpus_free.count(spec.gpu.model) ? catalog.gpus_free.at(spec.gpu.model) : 0;
    int want = spec.gpu.count * new_containers;
    if (want > free)
      return conflict("gpu.count", std::to_string(new_containers) + " containers x " + std::to_string(spec.gpu.count) +
                                       " " + spec.gpu.model + " need " + std::to_string(want) + " GPUs; " +
                                       std::to_string(free) + " of " + std::to_string(total->second) + " are free",
                      "ask for fewer containers or GPUs, or delete a cluster that holds them");
  }
  return std::nullopt;
}

json spec_to_json(const ClusterSpec& spec) {
  json mounts = json::array();
  for (const auto& m : spec.mounts) mounts.push_back({{"volume", m.volume}, {"path", m.path}, {"read_only", m.read_only}});
  json j = {{"name", spec.name},         {"framework", spec.framework},     {"containers", spec.containers},
            {"image", spec.image},       {"shm", format_size(spec.shm_bytes)}, {"mounts", mounts},
            {"env", spec.env}};
  j["gpu"] = spec.gpu.count > 0 ? json{{"model", spec.gpu.model}, {"count", spec.gpu.count}} : json(nullptr);
  return j;
}

json container_to_json(const ContainerStatus& c, const std::string& cluster) {
  (void)cluster;
  return {{"name", c.name},       {"role", c.role()},       {"index", c.index},     {"phase", c.phase},
          {"message", c.message}, {"hostname", c.name},     {"address", c.address}, {"gpus", c.gpus},
          {"started_at", c.started_at}};
}

json cluster_to_json(const Cluster& cluster) {
  json containers = json::array();
  for (const auto& c : cluster.containers) containers.push_back(container_to_json(c, cluster.spec.name));
  json j = spec_to_json(cluster.spec);
  j["owner"] = cluster.owner;
  j["created_at"] = cluster.created_at;
  j["status"] = {{"phase", cluster.phase}, {"message", cluster.message}, {"containers", containers}};
  return j;
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
