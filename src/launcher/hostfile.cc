#include "launcher/hostfile.h"

#include <arpa/inet.h>

#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

namespace edt::launcher {
namespace {

constexpr int kMaxSlots = 1 << 20;
constexpr const char* kFormats = "write 'host slots=N', 'host:N' or 'host'";

bool is_ipv6_address(std::string_view text) {
  // inet_pton() reads up to a NUL; "::1\0x" is not "::1".
  if (text.find('\0') != std::string_view::npos) return false;
  in6_addr address;
  return inet_pton(AF_INET6, std::string(text).c_str(), &address) == 1;
}

// A DNS name or an IPv4 address. A leading '-' would read as an option to ssh.
bool is_host_name(std::string_view text) {
  if (text.empty() || text.front() == '-' || text.front() == '.') return false;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') return false;
  }
  return true;
}

// "4" -> 4; an error message (without location) otherwise.
Result<int> parse_slot_count(std::string_view text, std::string_view what) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 1 || value > kMaxSlots) {
    return invalid_argument(std::string(what) + " '" + std::string(text) + "' is not a slot count (a whole number from 1 to " +
                            std::to_string(kMaxSlots) + ")");
  }
  return value;
}

std::vector<std::string_view> split_whitespace(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

// The first word of an entry: "host", "host:N", "[v6]:N" or a bare IPv6
// address. Sets *slots_given when the word carries a slot count.
Result<HostSlots> parse_host_word(std::string_view word, bool* slots_given) {
  HostSlots result;
  *slots_given = false;
  std::string_view host = word;
  std::string_view slots;
  if (word.front() == '[') {
    size_t close = word.find(']');
    if (close == std::string_view::npos) return invalid_argument("'" + std::string(word) + "' has '[' without ']'");
    host = word.substr(1, close - 1);
    std::string_view rest = word.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return invalid_argument("unexpected '" + std::string(rest) + "' after ']'");
      slots = rest.substr(1);
      *slots_given = true;
    }
    if (!is_ipv6_address(host)) return invalid_argument("'" + std::string(host) + "' in brackets is not an IPv6 address");
  } else if (word.find(':') != word.rfind(':')) {
    // Two or more colons: a bare IPv6 address, which cannot carry ":N".
    if (!is_ipv6_address(word)) {
      return invalid_argument("'" + std::string(word) +
                              "' is neither 'host:N' nor an IPv6 address; write an IPv6 address with slots as '[addr]:N'");
    }
  } else if (size_t colon = word.find(':'); colon != std::string_view::npos) {
    host = word.substr(0, colon);
    slots = word.substr(colon + 1);
    *slots_given = true;
  }
  if (!is_ipv6_address(host) && !is_host_name(host)) {
    return invalid_argument("'" + std::string(host) +
                            "' is not a host name or address (letters, digits, '-', '.', '_'; not starting with '-' or '.')");
  }
  result.host = std::string(host);
  if (*slots_given) {
    EDT_ASSIGN_OR_RETURN(result.slots, parse_slot_count(slots, "the count after ':'"));
  }
  return result;
}

// One hostfile line or -H entry, comments already removed.
Result<HostSlots> parse_entry(std::string_view entry) {
  std::vector<std::string_view> words = split_whitespace(entry);
  bool slots_given = false;
  EDT_ASSIGN_OR_RETURN(HostSlots host, parse_host_word(words.front(), &slots_given));
  int max_slots = 0;
  for (size_t i = 1; i < words.size(); ++i) {
    std::string_view word = words[i];
    size_t eq = word.find('=');
    std::string_view key = word.substr(0, eq);
    if (eq == std::string_view::npos || (key != "slots" && key != "max_slots" && key != "max-slots")) {
      return invalid_argument("unexpected '" + std::string(word) + "' after the host; only slots=N and max_slots=N may follow it");
    }
    std::string_view value = word.substr(eq + 1);
    if (key == "slots") {
      if (slots_given) return invalid_argument("the slots are given twice");
      EDT_ASSIGN_OR_RETURN(host.slots, parse_slot_count(value, "slots="));
      slots_given = true;
    } else {
      if (max_slots != 0) return invalid_argument("max_slots is given twice");
      EDT_ASSIGN_OR_RETURN(max_slots, parse_slot_count(value, std::string(key) + "="));
    }
  }
  // max_slots bounds oversubscription in OpenMPI; edtrun never oversubscribes,
  // so it only has to be consistent with slots.
  if (max_slots != 0 && host.slots > max_slots) {
    return invalid_argument("slots=" + std::to_string(host.slots) + " is more than max_slots=" + std::to_string(max_slots));
  }
  return host;
}

// Shared by hostfiles and -H: `entries` pairs each entry's text with where it
// came from; duplicates are reported with both places.
Result<std::vector<HostSlots>> parse_entries(const std::vector<std::pair<std::string, std::string_view>>& entries,
                                             const std::string& empty_message) {
  std::vector<HostSlots> hosts;
  std::map<std::string, std::string> first_seen;  // host -> where
  for (const auto& [where, entry] : entries) {
    auto host = parse_entry(entry);
    if (!host.is_ok()) {
      return invalid_argument(where + ": '" + std::string(entry) + "': " + host.status().message() + "; " + kFormats);
    }
    auto [it, inserted] = first_seen.emplace(host->host, where);
    if (!inserted) {
      return invalid_argument(where + ": host '" + host->host + "' is listed again (first at " + it->second +
                              "); list each host once with all its slots, e.g. '" + host->host + " slots=N'");
    }
    hosts.push_back(std::move(host).value());
  }
  if (hosts.empty()) return invalid_argument(empty_message);
  return hosts;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

}  // namespace

Result<std::vector<HostSlots>> parse_hostfile(std::string_view text, const std::string& source) {
  std::vector<std::pair<std::string, std::string_view>> entries;
  int line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    ++line_number;
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    line = trim(line.substr(0, line.find('#')));
    if (!line.empty()) entries.emplace_back(source + ":" + std::to_string(line_number), line);
  }
  return parse_entries(entries, source + ": no hosts in the hostfile; add one line per host, e.g. 'node1 slots=2'");
}

Result<std::vector<HostSlots>> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return io_error("cannot read hostfile " + path + " (give an existing file to --hostfile)", errno);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hostfile(text.str(), path);
}

Result<std::vector<HostSlots>> parse_host_list(std::string_view list) {
  std::vector<std::pair<std::string, std::string_view>> entries;
  size_t start = 0;
  for (int index = 1; start <= list.size(); ++index) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view entry = trim(list.substr(start, end - start));
    start = end + 1;
    if (entry.empty()) {
      return invalid_argument("-H entry " + std::to_string(index) + " is empty; write -H host1:N,host2:M");
    }
    entries.emplace_back("-H entry " + std::to_string(index), entry);
  }
  return parse_entries(entries, "-H lists no hosts; write -H host1:N,host2:M");
}

std::string format_host_list(const std::vector<HostSlots>& hosts) {
  std::string text;
  for (const auto& h : hosts) {
    if (!text.empty()) text += ",";
    text += (h.host.find(':') != std::string::npos ? "[" + h.host + "]" : h.host) + ":" + std::to_string(h.slots);
  }
  return text;
}

}  // namespace edt::launcher
