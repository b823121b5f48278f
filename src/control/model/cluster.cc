#include "control/model/cluster.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string_view>

namespace edt::control {

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

// The system directories of a container; a mount may not cover them.
const std::vector<std::string>& system_directories() {
  static const std::vector<std::string> kDirs = {"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64",
                                                 "/proc", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var", "/job"};
  return kDirs;
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

}  // namespace

bool path_within(const std::string& path, const std::string& dir) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

Status check_env_name(const std::string& key) {
  const bool ok = !key.empty() && key.size() <= api::limits::Env::key_max_length &&
                  !std::isdigit(static_cast<unsigned char>(key[0])) &&
                  std::all_of(key.begin(), key.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  if (!ok)
    return invalid("env." + key, "'" + key + "' is not a variable name",
                   "use 1 to " + std::to_string(api::limits::Env::key_max_length) +
                       " letters, digits and _ (not first a digit)");
  return Status::ok();
}

// A value goes into sshd's configuration and into shells' environments:
// what either would read otherwise than written is refused.
Status check_env_value(const std::string& key, const std::string& value) {
  const std::string field = "env." + key;
  if (value.size() > api::limits::EnvValue::max_length)
    return invalid(field, field + " is " + std::to_string(value.size()) + " bytes, more than " +
                              std::to_string(api::limits::EnvValue::max_length),
                   "pass a longer value in a file on a volume instead");
  if (size_t at = first_forbidden(value, "\"\\"); at != std::string::npos)
    return invalid(field, field + " has " + describe_char(value[at]) + " at byte " + std::to_string(at),
                   "leave out control characters, '\"' and '\\' (a file on a volume can hold any text)");
  return Status::ok();
}


Status check_cluster_name(const std::string& name, const std::string& field) {
  if (!is_dns_label(name, kMaxClusterNameLength))
    return invalid(field, "'" + name + "' is not a valid cluster name",
                         "use 1 to " + std::to_string(kMaxClusterNameLength) +
                             " lower-case letters, digits and '-', not starting or ending with '-' (e.g. tthvd)");
  return Status::ok();
}

Status check_resource_name(const std::string& name, const std::string& field, const std::string& what) {
  if (!is_dns_label(name, 63))
    return invalid(field, "'" + name + "' is not a valid " + what + " name",
                         "use lower-case letters, digits and '-', not starting or ending with '-'");
  return Status::ok();
}


Status check_container_path(const std::string& path, const std::string& field) {
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
  return Status::ok();
}

Status check_mount_path(const std::string& path, const std::string& field) {
  EDT_RETURN_IF_ERROR(check_container_path(path, field));
  if (path == "/" || path == "/root")
    return invalid(field, field + " '" + path + "' would cover the container's " + (path == "/" ? "root" : "home"),
                         "mount below it, e.g. /root/data");
  for (const auto& dir : system_directories()) {
    if (path_within(path, dir) || path_within(dir, path))
      return invalid(field, field + " '" + path + "' covers the system directory " + dir,
                           "mount somewhere else, e.g. /root/data or /data");
  }
  return Status::ok();
}


Status check_megatron_parallel(const ClusterSpec& spec, int containers, const std::string& field) {
  if (!spec.megatron.given()) return Status::ok();
  const int per_container = std::max(spec.gpu.count, 1);
  const int gpus = containers * per_container;
  const int model = spec.megatron.product();
  if (gpus % model == 0) return Status::ok();
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


}  // namespace edt::control
