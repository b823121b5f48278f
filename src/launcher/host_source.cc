#include "launcher/host_source.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "launcher/process.h"

namespace edt::launcher {
namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(std::chrono::milliseconds d) {
  return fmt::format("{:g} s", static_cast<double>(d.count()) / 1000.0);
}

// Appends what `fd` has now to `text`.
void read_available(int fd, std::string& text) {
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(n));
}

}  // namespace

WatchedHostfile::WatchedHostfile(std::string path) : path_(std::move(path)) {
  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ < 0) return;  // polling only
  std::filesystem::path dir = std::filesystem::absolute(path_).parent_path();
  if (inotify_add_watch(inotify_fd_, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MODIFY) < 0) {
    close(inotify_fd_);
    inotify_fd_ = -1;
  }
}

WatchedHostfile::~WatchedHostfile() {
  if (inotify_fd_ >= 0) close(inotify_fd_);
}

bool WatchedHostfile::take_change() {
  if (inotify_fd_ < 0) return false;
  bool changed = false;
  alignas(inotify_event) char buffer[4096];
  const std::string name = std::filesystem::path(path_).filename().string();
  ssize_t n;
  while ((n = read(inotify_fd_, buffer, sizeof buffer)) > 0) {
    for (char* p = buffer; p < buffer + n;) {
      auto* event = reinterpret_cast<inotify_event*>(p);
      if (event->len > 0 && name == event->name) changed = true;
      p += sizeof(inotify_event) + event->len;
    }
  }
  return changed;
}

std::chrono::milliseconds DiscoveryScript::interval() const {
  if (options_.interval.count() > 0) return options_.interval;
  if (last_failed_) return kSlowest;
  return std::clamp(last_run_ * kCostFactor, kFastest, kSlowest);
}

Result<std::vector<HostSlots>> DiscoveryScript::poll() {
  const auto started = Clock::now();
  auto hosts = run();
  last_run_ = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  last_failed_ = !hosts.is_ok();
  return hosts;
}

Result<std::vector<HostSlots>> DiscoveryScript::run() {
  SpawnOptions spawn;
  spawn.argv = {"/bin/sh", "-c", options_.script};
  for (const auto& [name, value] : options_.env) spawn.env.push_back(name + "=" + value);
  EDT_ASSIGN_OR_RETURN(auto process, Process::spawn(spawn));
  std::string out, err;
  const auto deadline = Clock::now() + options_.timeout;
  for (;;) {
    pollfd fds[2] = {{process->stdout_fd(), POLLIN, 0}, {process->stderr_fd(), POLLIN, 0}};
    ::poll(fds, 2, 10);
    read_available(process->stdout_fd(), out);
    read_available(process->stderr_fd(), err);
    if (auto status = process->poll_exit()) {
      read_available(process->stdout_fd(), out);
      if (!status->success())
        return unavailable("host discovery script '" + options_.script + "' " + status->describe() +
                           (err.empty() ? "" : ": " + err));
      return parse_discovered_hosts(out, options_.slots_per_host);
    }
    if (Clock::now() > deadline)
      return timeout_error("host discovery script '" + options_.script + "' ran longer than " +
                           seconds_text(options_.timeout));  // ~Process kills it
  }
}

Result<std::vector<HostSlots>> parse_discovered_hosts(const std::string& text, int slots_per_host) {
  // A bare host gets slots_per_host; everything else is hostfile syntax.
  std::ostringstream normalised;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string body = line.substr(0, line.find('#'));
    body.erase(0, body.find_first_not_of(" \t\r"));
    body.erase(body.find_last_not_of(" \t\r") + 1);
    const bool bare = !body.empty() && body.find(':') == std::string::npos && body.find(' ') == std::string::npos;
    normalised << body << (bare ? ":" + std::to_string(slots_per_host) : "") << "\n";
  }
  return parse_hostfile(normalised.str(), "the host discovery script's output");
}

}  // namespace edt::launcher
