#include "control/backends/local/cgroups.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/io.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kCpuPeriodUs = 100000;  // the CPU bound's period: 100 ms
// A container's default share of the host's tasks, and its most.
constexpr int64_t kContainerShareDivisor = 16, kContainerShareMost = 4096;

// A positive number in `path` (one line, as /proc/sys writes it).
Result<int64_t> read_count(const std::string& path) {
  std::string text = io::read_file(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value <= 0)
    return failed_precondition(fmt::format("{} holds '{}', not a positive number of tasks", path, text));
  return value;
}

int64_t host_tasks(const HostTasks& host) { return std::min(host.pid_max, host.threads_max); }

// Writes `value` to a cgroup control file (no O_CREAT: the kernel makes them).
Status write_control(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return io_error("open " + path, errno);
  ssize_t n = ::write(fd, value.data(), value.size());
  int error = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) return io_error(fmt::format("write {} to {}", value, path), error);
  return Status::ok();
}

bool writable_cgroup(const std::string& dir) {
  return ::access((dir + "/cgroup.procs").c_str(), W_OK) == 0;
}

// The controllers that bound `limits`, by their v1 hierarchies' names.
std::vector<std::string> controllers(const ContainerLimits& limits) {
  std::vector<std::string> out;
  if (limits.pids_max > 0) out.push_back("pids");
  if (limits.memory_bytes > 0) out.push_back("memory");
  if (limits.cpu_millis > 0) out.push_back("cpu");
  return out;
}

Status write_memory(const std::string& dir, bool v2, uint64_t memory_bytes) {
  std::error_code ec;
  const std::string bytes = std::to_string(memory_bytes);
  EDT_RETURN_IF_ERROR(write_control(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"), bytes));
  // Swap is no way around the limit.
  if (v2) {
    if (fs::exists(dir + "/memory.swap.max", ec)) return write_control(dir + "/memory.swap.max", "0");
  } else if (fs::exists(dir + "/memory.memsw.limit_in_bytes", ec)) {
    return write_control(dir + "/memory.memsw.limit_in_bytes", bytes);
  }
  return Status::ok();
}

// A quota of CPU time in each period: thousandths of a CPU times 100 us.
Status write_cpu(const std::string& dir, bool v2, int64_t cpu_millis) {
  const std::string quota = std::to_string(cpu_millis * (kCpuPeriodUs / 1000));
  if (v2) return write_control(dir + "/cpu.max", quota + " " + std::to_string(kCpuPeriodUs));
  EDT_RETURN_IF_ERROR(write_control(dir + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs)));
  return write_control(dir + "/cpu.cfs_quota_us", quota);
}

// Writes the bounds of `limits` that `controller` ("" for v2: all) sets in `dir`.
Status write_limits(const std::string& dir, const std::string& controller, const ContainerLimits& limits) {
  const bool v2 = controller.empty();
  if (limits.pids_max > 0 && (v2 || controller == "pids"))
    EDT_RETURN_IF_ERROR(write_control(dir + "/pids.max", std::to_string(limits.pids_max)));
  if (limits.memory_bytes > 0 && (v2 || controller == "memory"))
    EDT_RETURN_IF_ERROR(write_memory(dir, v2, limits.memory_bytes));
  if (limits.cpu_millis > 0 && (v2 || controller == "cpu")) EDT_RETURN_IF_ERROR(write_cpu(dir, v2, limits.cpu_millis));
  return Status::ok();
}

// Makes the cgroup `dir` of `controller` ("" for v2, whose parent hands
// down the controllers of `enable`) and writes its bounds.
Status make_cgroup(const std::string& dir, const std::string& controller, const std::string& enable,
                   const ContainerLimits& limits) {
  std::error_code ec;
  // Another container leaving removes the parent once it is empty, which
  // may fall between making the parent and making this one in it (ENOENT),
  // or between another start making the parent and this one seeing it
  // there (EEXIST, with nothing there): make both again (once this one
  // exists the parent cannot go).
  for (int tries = 0; tries < 100; ++tries) {
    ec.clear();
    fs::create_directories(dir, ec);
    if (ec != std::errc::no_such_file_or_directory && ec != std::errc::file_exists) break;
  }
  if (ec) return Status(StatusCode::kIoError, "make cgroup " + dir + ": " + ec.message());
  if (controller.empty())
    EDT_RETURN_IF_ERROR(write_control(fs::path(dir).parent_path().string() + "/cgroup.subtree_control", enable));
  return write_limits(dir, controller, limits);
}

// Whether a v1 hierarchy of `controllers` ("pids", "cpu,cpuacct") is one
// that containers' cgroups are made in.
bool bounding_hierarchy(const std::string& controllers) {
  std::istringstream list(controllers);
  for (std::string c; std::getline(list, c, ',');)
    if (c == "pids" || c == "memory" || c == "cpu") return true;
  return false;
}

}  // namespace

Result<HostTasks> read_host_tasks(const std::string& proc_sys_kernel) {
  EDT_ASSIGN_OR_RETURN(int64_t pid_max, read_count(proc_sys_kernel + "/pid_max"));
  EDT_ASSIGN_OR_RETURN(int64_t threads_max, read_count(proc_sys_kernel + "/threads-max"));
  return HostTasks{pid_max, threads_max};
}

int64_t container_pids_share(const HostTasks& host) {
  return std::max<int64_t>(1, std::min(kContainerShareMost, host_tasks(host) / kContainerShareDivisor));
}

int64_t all_containers_pids_max(const HostTasks& host) { return std::max<int64_t>(1, host_tasks(host) / 2); }

bool bound_open_files() {
  const struct rlimit files = {kContainerOpenFiles, kContainerOpenFiles};
  return ::setrlimit(RLIMIT_NOFILE, &files) == 0;
}

ContainerCgroups::ContainerCgroups(std::string fs_root, std::string key, int64_t all_pids_max)
    : root_(std::move(fs_root)), parent_("edt-" + std::move(key)), all_pids_max_(all_pids_max) {
  if (all_pids_max_ == kHostShare) {
    auto host = read_host_tasks();
    all_pids_max_ = host.is_ok() ? all_containers_pids_max(*host) : 0;
  }
}

bool ContainerCgroups::unified() const {
  std::error_code ec;
  return fs::exists(root_ + "/cgroup.controllers", ec);
}

std::string ContainerCgroups::unavailable(const ContainerLimits& limits) const {
  for (const auto& controller : controllers(limits)) {
    if (unified()) {
      std::istringstream available(io::read_file(root_ + "/cgroup.controllers"));
      bool found = false;
      for (std::string c; available >> c;) found |= c == controller;
      if (!found) return fmt::format("cgroup v2 at {} has no {} controller", root_, controller);
      if (!writable_cgroup(root_)) return fmt::format("cgroup v2 at {} is not writable by edtd", root_);
    } else if (!writable_cgroup(root_ + "/" + controller)) {
      return fmt::format("no writable cgroup v1 {} hierarchy at {}/{}", controller, root_, controller);
    }
  }
  return "";
}

std::vector<std::pair<std::string, std::string>> ContainerCgroups::dirs(const std::string& container,
                                                                        const ContainerLimits& limits) const {
  if (unified()) return {{"", root_ + "/" + parent_ + "/" + container}};
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& controller : controllers(limits))
    out.emplace_back(controller, root_ + "/" + controller + "/" + parent_ + "/" + container);
  return out;
}

Result<std::vector<std::string>> ContainerCgroups::make(const std::string& container,
                                                         const ContainerLimits& limits) const {
  std::vector<std::string> procs;
  if (controllers(limits).empty()) return procs;
  if (std::string why = unavailable(limits); !why.empty()) return failed_precondition(why);
  EDT_RETURN_IF_ERROR(remove(container));
  // v2: each parent hands the controllers down to the containers' cgroups.
  std::string enable;
  for (const auto& controller : controllers(limits)) enable += (enable.empty() ? "+" : " +") + controller;
  if (unified()) EDT_RETURN_IF_ERROR(write_control(root_ + "/cgroup.subtree_control", enable));
  for (const auto& [controller, dir] : dirs(container, limits)) {
    Status st = make_cgroup(dir, controller, enable, limits);
    // All containers together: written on every make, since the parent
    // goes with the last container (and may be an earlier edtd's).
    if (st.is_ok() && all_pids_max_ > 0 && limits.pids_max > 0 && (controller.empty() || controller == "pids"))
      st = write_control(fs::path(dir).parent_path().string() + "/pids.max", std::to_string(all_pids_max_));
    if (!st.is_ok()) {
      (void)remove(container);  // nothing half made
      return st;
    }
    procs.push_back(dir + "/cgroup.procs");
  }
  return procs;
}

Status ContainerCgroups::remove(const std::string& container) const {
  const ContainerLimits all{1, 1, 1};
  for (const auto& hierarchy : dirs(container, all)) {
    const std::string& dir = hierarchy.second;
    // Processes killed with their PID namespace may take a moment to exit.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    int rc;
    while ((rc = ::rmdir(dir.c_str())) != 0 && errno == EBUSY && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (rc != 0 && errno != ENOENT) return io_error("remove cgroup " + dir, errno);
    // The parent goes with the last container; busy or missing is fine.
    (void)::rmdir(fs::path(dir).parent_path().c_str());
  }
  return Status::ok();
}

std::string cgroup_key(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a: the same key in every build
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return fmt::format("{:012x}", hash & 0xffffffffffffull);
}

Status join_cgroups(const std::string& proc_cgroup, const std::string& fs_root) {
  if (!bound_open_files()) return io_error("set RLIMIT_NOFILE to " + std::to_string(kContainerOpenFiles), errno);
  std::istringstream lines(proc_cgroup);
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-id:controllers:path
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (path.rfind("/edt-", 0) != 0 || path.find("/..") != std::string::npos) continue;
    std::string dir;
    if (controllers.empty()) {
      dir = fs_root + path;
    } else if (bounding_hierarchy(controllers)) {
      dir = fs_root + "/" + controllers + path;
    } else {
      continue;
    }
    EDT_RETURN_IF_ERROR(write_control(dir + "/cgroup.procs", "0"));  // "0": the writer
  }
  return Status::ok();
}

}  // namespace edt::control
