#include "launcher/worker_env.h"

#include <cctype>

extern char** environ;

namespace edt::launcher {
namespace {

bool is_variable_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

}  // namespace

Environment current_environment() {
  Environment env;
  for (char** it = environ; *it != nullptr; ++it) {
    std::string entry(*it);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::vector<std::string> env_entries(const Environment& env) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  return entries;
}

Environment placement_variables(const SlotInfo& slot, const Rendezvous& rendezvous) {
  Environment env;
  const std::pair<const char*, std::string> shared[] = {
      {"RANK", std::to_string(slot.rank)},
      {"SIZE", std::to_string(slot.size)},
      {"LOCAL_RANK", std::to_string(slot.local_rank)},
      {"LOCAL_SIZE", std::to_string(slot.local_size)},
      {"CROSS_RANK", std::to_string(slot.cross_rank)},
      {"CROSS_SIZE", std::to_string(slot.cross_size)},
      {"HOSTNAME", slot.host},
  };
  for (const auto& [name, value] : shared) {
    env[std::string("EDT_") + name] = value;
    env[std::string("HOROVOD_") + name] = value;
  }
  env["EDT_COORDINATOR"] = rendezvous.coordinator;
  env["RANK"] = std::to_string(slot.rank);
  env["WORLD_SIZE"] = std::to_string(slot.size);
  env["LOCAL_RANK"] = std::to_string(slot.local_rank);
  env["LOCAL_WORLD_SIZE"] = std::to_string(slot.local_size);
  env["GROUP_RANK"] = std::to_string(slot.host_index);
  env["MASTER_ADDR"] = rendezvous.master_addr;
  env["MASTER_PORT"] = std::to_string(rendezvous.master_port);
  return env;
}

Environment per_host_variables(const SlotInfo& slot, const std::vector<int>& node_slots) {
  const size_t index = static_cast<size_t>(slot.host_index);
  return {{"NNODES", std::to_string(slot.size)},
          {"NUM_NODES", std::to_string(slot.size)},
          {"NODE_RANK", std::to_string(slot.host_index)},
          {"GPUS_PER_NODE", std::to_string(index < node_slots.size() ? node_slots[index] : 1)}};
}

bool is_host_specific(const std::string& name) {
  static const char* const kNames[] = {
      "HOSTNAME", "HOST", "PWD", "OLDPWD", "SHLVL", "_", "HOME", "USER", "LOGNAME", "MAIL", "SHELL",
      "DISPLAY", "XAUTHORITY", "TMUX", "TMUX_PANE", "STY", "WINDOW", "TERM_SESSION_ID", "PS1",
      "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "XDG_SESSION_ID", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS",
      "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "EDT_HOST_GPUS", "TMPDIR",
  };
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return starts_with(name, "SSH_") || starts_with(name, "BASH_FUNC_") || !is_variable_name(name);
}

Result<Environment> parse_exports(const std::vector<std::string>& specs, const Environment& launcher_env) {
  Environment exports;
  for (const auto& spec : specs) {
    size_t eq = spec.find('=');
    std::string name = spec.substr(0, eq);
    if (!is_variable_name(name)) {
      return invalid_argument("-x '" + spec + "': '" + name +
                              "' is not a variable name (letters, digits and '_', not starting with a digit); write -x VAR or -x VAR=VALUE");
    }
    if (eq != std::string::npos) {
      exports[name] = spec.substr(eq + 1);
    } else if (auto it = launcher_env.find(name); it != launcher_env.end()) {
      exports[name] = it->second;
    } else {
      return invalid_argument("-x " + name + ": " + name + " is not set in edtrun's environment; set it or write -x " + name + "=VALUE");
    }
  }
  return exports;
}

Environment worker_environment(const SlotInfo& slot, const Rendezvous& rendezvous, const WorkerEnvironmentInputs& inputs) {
  Environment env;
  for (const auto& [name, value] : *inputs.launcher_env) {
    if (!inputs.remote || !is_host_specific(name)) env[name] = value;
  }
  for (const auto& [name, value] : *inputs.exports) env[name] = value;
  env.emplace("OMP_NUM_THREADS", "1");  // only if the user did not set it
  for (auto& [name, value] : placement_variables(slot, rendezvous)) env[name] = std::move(value);
  if (inputs.node_slots)
    for (auto& [name, value] : per_host_variables(slot, *inputs.node_slots)) env[name] = std::move(value);
  return env;
}

}  // namespace edt::launcher
