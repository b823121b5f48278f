#include "cli/commands.h"

#include <cstdio>

#include "common/log.h"

namespace edt::cli {

int fail(const ApiFailure& failure) {
  log::error("{}", failure.to_string());
  return 1;
}

int usage_error(const std::string& message, const std::string& fix) {
  log::error("{}\n  fix: {}", message, fix);
  return 2;
}

void add_output_option(CLI::App* command, std::string* output) {
  command->add_option("-o,--output", *output, "json for scripts")->check(CLI::IsMember({"json", "table"}));
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i)
      line += i + 1 == row.size() ? row[i] : row[i] + std::string(width[i] - row[i].size() + 2, ' ');
    printf("%s\n", line.c_str());
  }
}

bool print_json_if_asked(const std::string& output, const nlohmann::json& list) {
  if (output != "json") return false;
  printf("%s\n", list.dump(2).c_str());
  return true;
}

std::string query_value(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

std::string join_choices(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return out;
}

}  // namespace edt::cli
