#include "common/process.h"

#include <charconv>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace edt::proc {

std::optional<Stat> read_stat(int64_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces and ')': the fields after it
  // follow its last ')'.
  auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return std::nullopt;
  std::string_view rest(text);
  rest.remove_prefix(close + 2);
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

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (const auto& s : strings) result.push_back(const_cast<char*>(s.c_str()));
  result.push_back(nullptr);
  return result;
}

}  // namespace edt::proc
