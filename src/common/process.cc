#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace edt::proc {

std::optional<Stat> read_stat(int64_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  return parse_stat(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
}

std::optional<Stat> parse_stat(std::string_view text) {
  // The command name (field 2) may hold spaces and ')': the fields after it
  // follow its last ')'.
  auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return std::nullopt;
  std::string_view rest = text.substr(close + 2);
  Stat stat;
  for (int field = 3; field <= 22 && !rest.empty(); ++field) {
    auto end = rest.find(' ');
    std::string_view value = rest.substr(0, end);
    if (field == 3) stat.state = value.empty() ? '?' : value[0];
    if (field == 4) std::from_chars(value.data(), value.data() + value.size(), stat.ppid);
    if (field == 22) {
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), stat.start_time);
      if (ec != std::errc()) return std::nullopt;
      return stat;
    }
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return std::nullopt;
}

std::optional<ProcessId> identify(int64_t pid) {
  auto stat = read_stat(pid);
  if (!stat) return std::nullopt;
  return ProcessId{pid, stat->start_time};
}

bool alive(const ProcessId& id) {
  if (id.pid <= 0 || id.start_time == 0) return false;
  auto stat = read_stat(id.pid);
  return stat && !stat->zombie() && stat->start_time == id.start_time;
}

void unblock_signals() {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

bool namespace_init(std::string_view status) {
  const size_t at = status.find("\nNSpid:");
  if (at == std::string_view::npos) return false;
  std::istringstream line(std::string(status.substr(at + 7, status.find('\n', at + 1) - at - 7)));
  std::vector<std::string> pids{std::istream_iterator<std::string>(line), std::istream_iterator<std::string>()};
  return pids.size() > 1 && pids.back() == "1";
}

Result<PinnedProcess> PinnedProcess::open(int64_t pid, uint64_t start_time) {
  const std::string what = "process " + std::to_string(pid);
  if (pid <= 0) return not_found(what + ": not a pid");
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  if (pidfd < 0) return not_found(what + ": " + std::strerror(errno));
  const int dir = ::open(("/proc/" + std::to_string(pid)).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  PinnedProcess process(pid, pidfd, dir < 0 ? -1 : dir);
  if (dir < 0) return not_found(what + ": " + std::strerror(errno));
  auto stat = parse_stat(process.read("stat"));
  if (!stat || stat->zombie() || !process.still_alive()) return not_found(what + " has exited");
  if (start_time != 0 && stat->start_time != start_time) return not_found(what + " is another process (reused pid)");
  return process;
}

PinnedProcess::PinnedProcess(PinnedProcess&& other) noexcept
    : pid_(other.pid_), pidfd_(std::exchange(other.pidfd_, -1)), dir_(std::exchange(other.dir_, -1)) {}

PinnedProcess& PinnedProcess::operator=(PinnedProcess&& other) noexcept {
  if (this != &other) {
    close_all();
    pid_ = other.pid_;
    pidfd_ = std::exchange(other.pidfd_, -1);
    dir_ = std::exchange(other.dir_, -1);
  }
  return *this;
}

PinnedProcess::~PinnedProcess() { close_all(); }

void PinnedProcess::close_all() {
  for (int* fd : {&pidfd_, &dir_})
    if (*fd >= 0) ::close(std::exchange(*fd, -1));
}

int PinnedProcess::open_entry(const std::string& name, int flags) const {
  return ::openat(dir_, name.c_str(), flags | O_CLOEXEC);
}

std::string PinnedProcess::read(const std::string& name) const {
  const int fd = open_entry(name, O_RDONLY);
  if (fd < 0) return "";
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof(buffer))) > 0 || (n < 0 && errno == EINTR);)
    if (n > 0) text.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  return text;
}

bool PinnedProcess::still_alive() const {
  struct pollfd p = {pidfd_, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (const auto& s : strings) result.push_back(const_cast<char*>(s.c_str()));
  result.push_back(nullptr);
  return result;
}

}  // namespace edt::proc
