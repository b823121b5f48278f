#include "launcher/slurm_allocation.h"

#include <charconv>

namespace edt::launcher {

namespace {

constexpr size_t kMaxHosts = 100000;  // in one host expression

Status bad_list(std::string_view list, const std::string& why) {
  return invalid_argument("Slurm node list '" + std::string(list) + "': " + why);
}

bool parse_number(std::string_view s, long* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && *out >= 0;
}

// "0-2" or "5", zero-padded as written ("08-11" gives 08 09 10 11).
Status expand_range(std::string_view item, std::string_view list, std::vector<std::string>* out) {
  const size_t dash = item.find('-');
  const std::string_view low = item.substr(0, dash), high = dash == std::string_view::npos ? low : item.substr(dash + 1);
  long from = 0, to = 0;
  if (!parse_number(low, &from) || !parse_number(high, &to) || to < from)
    return bad_list(list, "'" + std::string(item) + "' is not a number or a range low-high");
  if (to - from > static_cast<long>(kMaxHosts)) return bad_list(list, "the range '" + std::string(item) + "' is too large");
  const size_t width = low.size() > 1 && low[0] == '0' ? low.size() : 0;
  for (long n = from; n <= to; ++n) {
    std::string digits = std::to_string(n);
    if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
    out->push_back(std::move(digits));
  }
  return Status::ok();
}

// One host expression: "name", "prefix[1-3,5]suffix", with brackets in the
// suffix too ("a[1-2]-b[3-4]").
Status expand_host(std::string_view host, std::string_view list, std::vector<std::string>* out) {
  const size_t open = host.find('[');
  if (open == std::string_view::npos) {
    if (host.find(']') != std::string_view::npos) return bad_list(list, "']' without '['");
    out->emplace_back(host);
    return Status::ok();
  }
  const size_t close = host.find(']', open);
  if (close == std::string_view::npos) return bad_list(list, "'[' without ']'");
  std::vector<std::string> numbers;
  std::string_view inside = host.substr(open + 1, close - open - 1);
  while (true) {
    const size_t comma = inside.find(',');
    EDT_RETURN_IF_ERROR(expand_range(inside.substr(0, comma), list, &numbers));
    if (comma == std::string_view::npos) break;
    inside.remove_prefix(comma + 1);
  }
  std::vector<std::string> tails;
  EDT_RETURN_IF_ERROR(expand_host(host.substr(close + 1), list, &tails));
  if (numbers.size() * tails.size() > kMaxHosts)
    return bad_list(list, "'" + std::string(host) + "' names more than " + std::to_string(kMaxHosts) + " hosts");
  const std::string prefix(host.substr(0, open));
  for (const auto& n : numbers)
    for (const auto& tail : tails) out->push_back(prefix + n + tail);
  return Status::ok();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::vector<std::string>> expand_nodelist(std::string_view nodelist) {
  const std::string_view list = trim(nodelist);
  if (list.empty()) return invalid_argument("the Slurm node list is empty");
  std::vector<std::string> hosts;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return bad_list(list, "']' without '['");
    if (c != ',' || depth > 0) continue;
    const std::string_view part = list.substr(start, i - start);
    if (part.empty()) return bad_list(list, "an empty name");
    EDT_RETURN_IF_ERROR(expand_host(part, list, &hosts));
    start = i + 1;
  }
  if (depth != 0) return bad_list(list, "'[' without ']'");
  return hosts;
}

Result<std::vector<int>> expand_tasks_per_node(std::string_view tasks) {
  std::vector<int> out;
  std::string_view rest = trim(tasks);
  auto bad = [&](std::string_view part) {
    return invalid_argument("SLURM_TASKS_PER_NODE='" + std::string(tasks) + "': '" + std::string(part) +
                            "' is not N or N(xM)");
  };
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view part = rest.substr(0, comma);
    long count = 0, repeat = 1;
    const size_t paren = part.find("(x");
    if (!parse_number(part.substr(0, paren), &count) || count < 1) return bad(part);
    if (paren != std::string_view::npos) {
      if (part.back() != ')' || !parse_number(part.substr(paren + 2, part.size() - paren - 3), &repeat) ||
          repeat < 1 || repeat > 100000)
        return bad(part);
    }
    out.insert(out.end(), static_cast<size_t>(repeat), static_cast<int>(count));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
    if (rest.empty()) return bad("");
  }
  if (out.empty()) return bad(tasks);
  return out;
}

bool in_slurm_allocation(const Environment& env) {
  auto it = env.find("SLURM_JOB_NODELIST");
  return it != env.end() && !it->second.empty();
}

Result<std::vector<HostSlots>> slurm_allocation_hosts(const Environment& env) {
  auto list = env.find("SLURM_JOB_NODELIST");
  if (list == env.end()) return invalid_argument("SLURM_JOB_NODELIST is not set: not inside a Slurm allocation");
  EDT_ASSIGN_OR_RETURN(std::vector<std::string> nodes, expand_nodelist(list->second));
  std::vector<int> slots(nodes.size(), 1);
  if (auto tasks = env.find("SLURM_TASKS_PER_NODE"); tasks != env.end() && !tasks->second.empty()) {
    EDT_ASSIGN_OR_RETURN(slots, expand_tasks_per_node(tasks->second));
    if (slots.size() != nodes.size())
      return invalid_argument("SLURM_TASKS_PER_NODE='" + tasks->second + "' gives " + std::to_string(slots.size()) +
                              " nodes, SLURM_JOB_NODELIST='" + list->second + "' " + std::to_string(nodes.size()));
  }
  std::vector<HostSlots> hosts;
  for (size_t i = 0; i < nodes.size(); ++i) hosts.push_back({nodes[i], slots[i]});
  return hosts;
}

}  // namespace edt::launcher
