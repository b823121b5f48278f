#include "control/backends/local/cgroups.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace edt::control {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

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

}  // namespace

ContainerCgroups::ContainerCgroups(std::string fs_root, std::string key)
    : root_(std::move(fs_root)), parent_("edt-" + std::move(key)) {}

bool ContainerCgroups::unified() const {
  std::error_code ec;
  return fs::exists(root_ + "/cgroup.controllers", ec);
}

std::string ContainerCgroups::unavailable(const ContainerLimits& limits) const {
  std::vector<std::string> wanted;
  if (limits.pids_max > 0) wanted.push_back("pids");
  if (limits.memory_bytes > 0) wanted.push_back("memory");
  for (const auto& controller : wanted) {
    if (unified()) {
      std::istringstream available(read_text(root_ + "/cgroup.controllers"));
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

std::vector<std::string> ContainerCgroups::dirs(const std::string& container, const ContainerLimits& limits) const {
  if (unified()) return {root_ + "/" + parent_ + "/" + container};
  std::vector<std::string> out;
  if (limits.pids_max > 0) out.push_back(root_ + "/pids/" + parent_ + "/" + container);
  if (limits.memory_bytes > 0) out.push_back(root_ + "/memory/" + parent_ + "/" + container);
  return out;
}

Result<std::vector<std::string>> ContainerCgroups::make(const std::string& container,
                                                         const ContainerLimits& limits) const {
  std::vector<std::string> procs;
  if (limits.pids_max <= 0 && limits.memory_bytes == 0) return procs;
  if (std::string why = unavailable(limits); !why.empty()) return failed_precondition(why);
  EDT_RETURN_IF_ERROR(remove(container));
  const bool v2 = unified();
  if (v2) {
    // The parent hands the controllers down to the containers' cgroups.
    EDT_RETURN_IF_ERROR(write_control(root_ + "/cgroup.subtree_control", "+pids +memory"));
  }
  for (const auto& dir : dirs(container, limits)) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Status(StatusCode::kIoError, "make cgroup " + dir + ": " + ec.message());
    if (v2) EDT_RETURN_IF_ERROR(write_control(fs::path(dir).parent_path().string() + "/cgroup.subtree_control", "+pids +memory"));
    const bool memory = v2 || dir.find("/memory/") != std::string::npos;
    if (limits.pids_max > 0 && (v2 || !memory))
      EDT_RETURN_IF_ERROR(write_control(dir + "/pids.max", std::to_string(limits.pids_max)));
    if (limits.memory_bytes > 0 && memory) {
      const std::string bytes = std::to_string(limits.memory_bytes);
      EDT_RETURN_IF_ERROR(write_control(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"), bytes));
      // Swap is no way around the limit.
      if (v2) {
        if (fs::exists(dir + "/memory.swap.max", ec)) EDT_RETURN_IF_ERROR(write_control(dir + "/memory.swap.max", "0"));
      } else if (fs::exists(dir + "/memory.memsw.limit_in_bytes", ec)) {
        EDT_RETURN_IF_ERROR(write_control(dir + "/memory.memsw.limit_in_bytes", bytes));
      }
    }
    procs.push_back(dir + "/cgroup.procs");
  }
  return procs;
}

Status ContainerCgroups::remove(const std::string& container) const {
  ContainerLimits all{1, 1};
  for (const auto& dir : dirs(container, all)) {
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

Status join_cgroups_of(pid_t pid, const std::string& fs_root) {
  std::istringstream lines(read_text(fmt::format("/proc/{}/cgroup", pid)));
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-id:controllers:path
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (path.rfind("/edt-", 0) != 0 || path.find("/..") != std::string::npos) continue;
    std::string dir;
    if (controllers.empty()) {
      dir = fs_root + path;
    } else if (controllers == "pids" || controllers == "memory") {
      dir = fs_root + "/" + controllers + path;
    } else {
      continue;
    }
    EDT_RETURN_IF_ERROR(write_control(dir + "/cgroup.procs", "0"));  // "0": the writer
  }
  return Status::ok();
}

}  // namespace edt::control
