#include "common/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace edt {
namespace {

// Splits "1.5Gi" into 1.5 and "Gi"; false if there is no leading number.
bool split_number(std::string_view text, double* number, std::string* suffix) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + i, *number);
  if (ec != std::errc() || end != text.data() + i) return false;
  *suffix = std::string(text.substr(i));
  for (auto& c : *suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return true;
}

}  // namespace

Result<uint64_t> parse_size(std::string_view text) {
  double number = 0;
  std::string suffix;
  if (!split_number(text, &number, &suffix))
    return invalid_argument("'" + std::string(text) + "' is not a size; write a number with an optional unit, e.g. 512M or 1Gi");
  double scale = 0;
  if (suffix.empty() || suffix == "b") scale = 1;
  else if (suffix == "k" || suffix == "kb" || suffix == "ki" || suffix == "kib") scale = 1024.0;
  else if (suffix == "m" || suffix == "mb" || suffix == "mi" || suffix == "mib") scale = 1024.0 * 1024;
  else if (suffix == "g" || suffix == "gb" || suffix == "gi" || suffix == "gib") scale = 1024.0 * 1024 * 1024;
  else if (suffix == "t" || suffix == "tb" || suffix == "ti" || suffix == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return invalid_argument("'" + std::string(text) + "' has an unknown size unit '" + suffix + "'; use K, M, G or T (binary, e.g. 512M, 1Gi)");
  const double bytes = std::round(number * scale);
  if (bytes > 1.8e19) return invalid_argument("'" + std::string(text) + "' is too large a size");
  return static_cast<uint64_t>(bytes);  // llround() would stop at 2^63
}

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  double number = 0;
  std::string suffix;
  if (!split_number(text, &number, &suffix))
    return invalid_argument("'" + std::string(text) + "' is not a duration; write e.g. 30s, 500ms or 2m");
  double ms = 0;
  if (suffix == "ms") ms = number;
  else if (suffix.empty() || suffix == "s") ms = number * 1000;
  else if (suffix == "m" || suffix == "min") ms = number * 60000;
  else if (suffix == "h") ms = number * 3600000;
  else
    return invalid_argument("'" + std::string(text) + "' has an unknown duration unit '" + suffix + "'; use ms, s, m or h");
  // Beyond this a count of milliseconds overflows (about 292 million years).
  if (ms > 9.2e18) return invalid_argument("'" + std::string(text) + "' is too long a duration");
  return std::chrono::milliseconds(std::llround(ms));
}

std::string format_size(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  if (value == std::floor(value)) std::snprintf(buf, sizeof buf, "%.0f %s", value, kUnits[unit]);
  else std::snprintf(buf, sizeof buf, "%.1f %s", value, kUnits[unit]);
  return buf;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace edt
