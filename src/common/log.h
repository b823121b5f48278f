// Logging: one logger for every edt program and library (spdlog underneath).
//
// Lines go to stderr as "<program>: <message>", with "warning: " or
// "error: " before the message at those levels, or, with Format::kJson, as
// one JSON object per line: {"time", "level", "program", "message"}.
// The level is EDT_LOG_LEVEL's (trace, debug, info, warning, error, off)
// unless init() is given one; info by default. Thread-safe.
//
//   edt::log::init("edtrun");
//   edt::log::info("worker {} on {} exited with code {}", rank, host, code);
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "edt/status.h"

namespace edt::log {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError, kOff };
enum class Format { kText, kJson };

// "trace", "debug", "info", "warning" (or "warn"), "error", "off".
Result<Level> parse_level(std::string_view name);
const char* level_name(Level level);

// Names the program in every line and sets the level and format. Without a
// level, the one in force: EDT_LOG_LEVEL's (a bad value is reported once and info used). Programs
// call it once at the start of main; libraries never call it.
void init(std::string_view program, std::optional<Level> level = std::nullopt, Format format = Format::kText);
void set_level(Level level);
Level level();
bool enabled(Level level);

// One line at `level` (dropped below the logger's level).
void write(Level level, std::string_view message);

// A formatted line at `level`, formatted only when it will be written.
template <typename... Args>
void at(Level level, fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(level)) write(level, fmt::format(format, std::forward<Args>(args)...));
}

// clang-format off
template <typename... Args> void trace(fmt::format_string<Args...> f, Args&&... a) { at(Level::kTrace, f, std::forward<Args>(a)...); }
template <typename... Args> void debug(fmt::format_string<Args...> f, Args&&... a) { at(Level::kDebug, f, std::forward<Args>(a)...); }
template <typename... Args> void info(fmt::format_string<Args...> f, Args&&... a) { at(Level::kInfo, f, std::forward<Args>(a)...); }
template <typename... Args> void warn(fmt::format_string<Args...> f, Args&&... a) { at(Level::kWarn, f, std::forward<Args>(a)...); }
template <typename... Args> void error(fmt::format_string<Args...> f, Args&&... a) { at(Level::kError, f, std::forward<Args>(a)...); }
// clang-format on

}  // namespace edt::log
