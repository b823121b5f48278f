#include "control/backends/local/proc_scan.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>

#include "common/io.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

// The pids in /proc now.
std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename();
    pid_t pid = 0;
    auto [ptr, ec_pid] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec_pid == std::errc() && ptr == name.data() + name.size() && !name.empty()) out.push_back(pid);
  }
  return out;
}

std::string pid_namespace(pid_t pid) {
  std::error_code ec;
  return fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/pid", ec).string();
}

// The value of `key` in `env`, a NUL-separated block that starts with a NUL.
std::string env_value(const std::string& env, std::string_view key) {
  const std::string mark = '\0' + std::string(key) + '=';
  const size_t at = env.find(mark);
  if (at == std::string::npos) return "";
  const size_t begin = at + mark.size();
  return env.substr(begin, env.find('\0', begin) - begin);
}

}  // namespace

std::vector<pid_t> processes_in_namespace(pid_t init) {
  std::vector<pid_t> out;
  const std::string ns = pid_namespace(init);
  if (ns.empty()) return out;
  for (pid_t pid : all_pids())
    if (pid_namespace(pid) == ns) out.push_back(pid);
  return out;
}

std::vector<LabelledProcess> labelled_processes(const std::string& home) {
  std::vector<LabelledProcess> out;
  const std::string own_ns = pid_namespace(::getpid());
  const std::string mark = '\0' + std::string(kLabelHome) + '=' + home + '\0';
  for (pid_t pid : all_pids()) {
    // Another user's process reads as empty.
    const std::string env = '\0' + io::read_file("/proc/" + std::to_string(pid) + "/environ");
    if (env.find(mark) == std::string::npos) continue;
    auto stat = proc::read_stat(pid);
    if (!stat || stat->zombie()) continue;
    LabelledProcess p{pid, *stat, env_value(env, kLabelCluster), env_value(env, kLabelContainer)};
    p.outer = pid_namespace(pid) == own_ns;
    p.init = !p.outer && proc::namespace_init(io::read_file("/proc/" + std::to_string(pid) + "/status"));
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<pid_t> stray_processes(const std::vector<LabelledProcess>& processes, const std::vector<SandboxRef>& keep) {
  auto kept = [&](const LabelledProcess& p) {
    return std::find(keep.begin(), keep.end(), SandboxRef{p.pid, p.stat.start_time}) != keep.end();
  };
  std::set<int64_t> monitors;
  for (const auto& p : processes)
    if (p.init && kept(p)) monitors.insert(p.stat.ppid);
  std::vector<pid_t> out;
  for (const auto& p : processes)
    if ((p.init && !kept(p)) || (p.outer && !monitors.count(p.pid))) out.push_back(p.pid);
  return out;
}

std::optional<std::string> cgroup_container(std::string_view proc_cgroup, std::string_view parent) {
  const std::string mark = "/" + std::string(parent) + "/";
  size_t begin = 0;
  while (begin < proc_cgroup.size()) {
    size_t end = proc_cgroup.find('\n', begin);
    if (end == std::string_view::npos) end = proc_cgroup.size();
    const std::string_view line = proc_cgroup.substr(begin, end - begin);
    begin = end + 1;
    // hierarchy-id:controllers:path; the path's last two components.
    const size_t colon = line.find(':', line.find(':') + 1);
    if (colon == std::string_view::npos) continue;
    const std::string_view path = line.substr(colon + 1);
    const size_t at = path.rfind(mark);
    if (at == std::string_view::npos) continue;
    const std::string_view name = path.substr(at + mark.size());
    if (!name.empty() && name.find('/') == std::string_view::npos) return std::string(name);
  }
  return std::nullopt;
}

}  // namespace edt::control
