#include "control/backends/slurm/slurm_jobs.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

namespace edt::control::slurm_jobs {
namespace {

using nlohmann::json;

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

std::optional<int64_t> to_int(const std::string& text) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// Bytes to whole MiB, rounded up: sbatch --mem's unit.
uint64_t mebibytes(uint64_t bytes) { return (bytes + (uint64_t{1} << 20) - 1) >> 20; }

json mounts_json(const std::vector<SandboxMount>& mounts) {
  json out = json::array();
  for (const auto& m : mounts) out.push_back({{"host_path", m.host_path}, {"path", m.path}, {"read_only", m.read_only}});
  return out;
}

std::vector<SandboxMount> read_mounts(const json& mounts) {
  std::vector<SandboxMount> out;
  for (const auto& m : mounts)
    out.push_back({m.at("host_path").get<std::string>(), m.at("path").get<std::string>(), m.at("read_only").get<bool>()});
  return out;
}

}  // namespace

std::vector<Job> parse_squeue(const std::string& text) {
  std::vector<Job> jobs;
  for (const std::string& line : split(text, '\n')) {
    const std::vector<std::string> f = split(line, '|');
    if (f.size() != 6) continue;
    auto id = to_int(f[0]);
    if (!id) continue;
    jobs.push_back({*id, f[1], f[2], f[3] == "(null)" ? "" : f[3], f[4], f[5] == "(null)" ? "" : f[5]});
  }
  return jobs;
}

bool ended(const std::string& state) {
  // Not COMPLETING: Slurm is still ending its processes, which may hold the
  // container's address a moment longer.
  static const std::set<std::string> kEnded = {"BOOT_FAIL", "CANCELLED", "COMPLETED",     "DEADLINE",
                                               "FAILED",    "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                                               "TIMEOUT",   "SPECIAL_EXIT", "REVOKED"};
  return kEnded.count(state) > 0;
}

bool waiting(const std::string& state) { return state == "PENDING" || state == "REQUEUED" || state == "REQUEUE_HOLD"; }

std::string job_name(const std::string& key, const std::string& container) { return "edt-" + key + "-" + container; }

std::string container_of(const std::string& key, const std::string& job_name) {
  const std::string prefix = "edt-" + key + "-";
  return job_name.starts_with(prefix) ? job_name.substr(prefix.size()) : "";
}

std::vector<std::string> sbatch_argv(const SandboxSpec& spec, const Placement& placement, const std::string& key,
                                     const std::string& output, const std::string& node_command) {
  const int64_t cpus = spec.cpu_millis > 0 ? (spec.cpu_millis + 999) / 1000 : 1;
  const uint64_t memory = spec.memory_bytes > 0 ? spec.memory_bytes : spec.shm_bytes + placement.default_memory_bytes;
  std::vector<std::string> argv = {"/usr/bin/sbatch",
                                   "--parsable",
                                   "--job-name=" + job_name(key, spec.name),
                                   "--comment=" + spec.cluster,
                                   "--partition=" + placement.partition,
                                   "--nodes=1",
                                   "--ntasks=1",
                                   "--cpus-per-task=" + std::to_string(cpus),
                                   "--mem=" + std::to_string(mebibytes(memory)) + "M",
                                   "--no-requeue",
                                   "--output=" + output,
                                   "--chdir=/"};
  if (!placement.account.empty()) argv.push_back("--account=" + placement.account);
  if (!placement.qos.empty()) argv.push_back("--qos=" + placement.qos);
  if (!spec.gpus.empty())
    argv.push_back("--gres=gpu:" + (spec.gpu_model.empty() ? "" : spec.gpu_model + ":") +
                   std::to_string(spec.gpus.size()));
  argv.push_back("--wrap=exec " + node_command);
  return argv;
}

int64_t parse_job_id(const std::string& text) {
  for (const std::string& line : split(text, '\n')) {
    auto id = to_int(line.substr(0, line.find(';')));
    if (id && *id > 0) return *id;
  }
  return 0;
}

std::optional<std::vector<int>> parse_gpu_list(const std::string& text) {
  std::vector<int> gpus;
  if (text.empty()) return gpus;
  for (const std::string& item : split(text, ',')) {
    auto index = to_int(item);
    if (!index || *index < 0 || *index > 4095) return std::nullopt;
    gpus.push_back(static_cast<int>(*index));
  }
  return gpus;
}

std::map<std::string, int> parse_gres_inventory(const std::string& text) {
  std::map<std::string, int> models;
  std::set<std::string> seen;
  for (const std::string& line : split(text, '\n')) {
    const size_t bar = line.find('|');
    if (bar == std::string::npos || !seen.insert(line.substr(0, bar)).second) continue;
    for (std::string gres : split(line.substr(bar + 1), ',')) {
      gres = gres.substr(0, gres.find('('));  // "(S:0-1)": its sockets
      const std::vector<std::string> f = split(gres, ':');
      if (f.empty() || f[0] != "gpu") continue;
      const std::string model = f.size() >= 3 ? f[1] : "gpu";
      auto count = to_int(f.back());
      if (f.size() >= 2 && count && *count > 0) models[model] += static_cast<int>(*count);
    }
  }
  return models;
}

int slot_port(const std::string& slot) {
  const std::vector<std::string> f = split(slot, '.');
  if (f.size() != 4 || f[0] != "0" || f[1] != "0") return 0;
  auto high = to_int(f[2]), low = to_int(f[3]);
  if (!high || !low || *high < 0 || *high > 255 || *low < 0 || *low > 255) return 0;
  return static_cast<int>(*high * 256 + *low);
}

std::string parse_node_address(const std::string& text) {
  for (const std::string& field : split(text, ' '))
    if (field.starts_with("NodeAddr=")) return field.substr(9);
  return "";
}

json job_file(const SandboxSpec& spec, const LocalBackendOptions& node) {
  json network = nullptr;
  if (node.network)
    network = {{"parent", node.network->parent},
               {"gateway", node.network->gateway},
               {"prefix", node.network->prefix},
               {"login_address", node.network->login_address},
               {"range", node.network->range}};
  return {{"spec",
           {{"cluster", spec.cluster}, {"name", spec.name}, {"address", spec.address}, {"image_root", spec.image_root},
            {"shm_bytes", spec.shm_bytes}, {"mounts", mounts_json(spec.mounts)}, {"env", spec.env}, {"job_dir", spec.job_dir},
            {"gpu_count", spec.gpus.size()}, {"gpu_model", spec.gpu_model}, {"id_range", spec.id_range},
            {"own_user", spec.own_user}, {"image_user", spec.image_user}}},
          {"node",
           {{"data_dir", node.data_dir}, {"ssh_port", node.ssh_port}, {"tool_binds", mounts_json(node.tool_binds)},
            {"tool_path", node.tool_path}, {"python_path", node.python_path}, {"network", network},
            {"first_subordinate_id", node.first_subordinate_id}}}};
}

Result<std::pair<SandboxSpec, LocalBackendOptions>> read_job_file(const json& j) {
  try {
    SandboxSpec spec;
    const json& s = j.at("spec");
    spec.cluster = s.at("cluster").get<std::string>();
    spec.name = s.at("name").get<std::string>();
    spec.address = s.at("address").get<std::string>();
    spec.image_root = s.at("image_root").get<std::string>();
    spec.shm_bytes = s.at("shm_bytes").get<uint64_t>();
    spec.mounts = read_mounts(s.at("mounts"));
    spec.env = s.at("env").get<std::map<std::string, std::string>>();
    spec.job_dir = s.at("job_dir").get<bool>();
    spec.gpus.assign(s.at("gpu_count").get<size_t>(), -1);  // Slurm says which
    spec.gpu_model = s.at("gpu_model").get<std::string>();
    spec.id_range = s.at("id_range").get<int64_t>();
    spec.own_user = s.value("own_user", false);
    spec.image_user = s.value("image_user", "");
    LocalBackendOptions node;
    const json& n = j.at("node");
    node.data_dir = n.at("data_dir").get<std::string>();
    node.ssh_port = n.at("ssh_port").get<int>();
    node.tool_binds = read_mounts(n.at("tool_binds"));
    node.tool_path = n.at("tool_path").get<std::vector<std::string>>();
    node.python_path = n.at("python_path").get<std::string>();
    node.first_subordinate_id = n.at("first_subordinate_id").get<uint32_t>();
    node.warm.enabled = false;
    if (const json& net = n.at("network"); !net.is_null()) {
      ContainerNetworkOptions options;
      options.parent = net.at("parent").get<std::string>();
      options.gateway = net.at("gateway").get<std::string>();
      options.prefix = net.at("prefix").get<int>();
      options.login_address = net.at("login_address").get<std::string>();
      options.range = net.value("range", "");
      options.containers_dir = node.data_dir + "/containers";
      node.network = options;
    }
    return std::make_pair(std::move(spec), std::move(node));
  } catch (const json::exception& e) {
    return invalid_argument(std::string("the job file is not edtd's: ") + e.what());
  }
}

Status make_passable_parents(const std::string& dir) {
  std::filesystem::path at;
  for (const auto& part : std::filesystem::path(dir).lexically_normal()) {
    at /= part;
    if (part.empty() || ::mkdir(at.c_str(), 0711) != 0) {
      if (errno == EEXIST || part.empty()) continue;
      return io_error("mkdir " + at.string(), errno);
    }
    ::chmod(at.c_str(), 0711);  // the umask narrowed mkdir's mode
  }
  return Status::ok();
}

std::string unpassable_parent(const std::string& dir) {
  std::filesystem::path at;
  for (const auto& part : std::filesystem::path(dir).lexically_normal()) {
    at /= part;
    struct stat st {};
    if (::stat(at.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) != 0) continue;
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
    return at.string() + " (mode " + mode + ")";
  }
  return "";
}

}  // namespace edt::control::slurm_jobs
