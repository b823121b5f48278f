#include "common/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <mutex>

#include "common/utf8.h"

namespace edt::log {
namespace {

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::kTrace: return spdlog::level::trace;
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

// %k: "warning: " / "error: " before the message in text lines.
class LevelPrefix final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string_view prefix = msg.level == spdlog::level::warn ? "warning: "
                              : msg.level >= spdlog::level::err ? "error: "
                                                                 : "";
    dest.append(prefix.data(), prefix.data() + prefix.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<LevelPrefix>(); }
};

// %*: the message as the inside of a JSON string (bytes that are not UTF-8
// become U+FFFD, so the line stays JSON whatever a message quotes).
class JsonMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    for (unsigned char c : utf8::sanitized(std::string_view(msg.payload.data(), msg.payload.size()))) {
      if (c == '"' || c == '\\') {
        dest.push_back('\\');
        dest.push_back(static_cast<char>(c));
      } else if (c < 0x20) {
        fmt::format_to(std::back_inserter(dest), "\\u{:04x}", c);
      } else {
        dest.push_back(static_cast<char>(c));
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessage>(); }
};

std::unique_ptr<spdlog::formatter> make_formatter(Format format) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc, "\n");
  formatter->add_flag<LevelPrefix>('k').add_flag<JsonMessage>('*');
  if (format == Format::kJson)
    formatter->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","program":"%n","message":"%*"})");
  else
    formatter->set_pattern("%n: %k%v");
  return formatter;
}

Level level_from_env() {
  const char* value = std::getenv("EDT_LOG_LEVEL");
  if (value == nullptr || *value == '\0') return Level::kInfo;
  auto parsed = parse_level(value);
  if (parsed.is_ok()) return *parsed;
  std::fprintf(stderr, "edt: warning: EDT_LOG_LEVEL: %s; using info\n", parsed.status().message().c_str());
  return Level::kInfo;
}

struct Logger {
  std::mutex mu;  // serialises init and set_level
  std::atomic<std::shared_ptr<spdlog::logger>> logger;
  std::atomic<Level> level{Level::kInfo};
};

Logger& state() {
  static Logger* logger = [] {
    auto* made = new Logger;
    made->level = level_from_env();
    auto logger = std::make_shared<spdlog::logger>("edt", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger->set_formatter(make_formatter(Format::kText));
    logger->set_level(to_spdlog(made->level));
    logger->flush_on(spdlog::level::trace);
    made->logger = std::move(logger);
    return made;
  }();
  return *logger;
}

}  // namespace

Result<Level> parse_level(std::string_view name) {
  if (name == "trace") return Level::kTrace;
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warning" || name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  if (name == "off") return Level::kOff;
  return invalid_argument("unknown log level '" + std::string(name) +
                          "'; use trace, debug, info, warning, error or off");
}

const char* level_name(Level level) {
  switch (level) {
    case Level::kTrace: return "trace";
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warning";
    case Level::kError: return "error";
    case Level::kOff: return "off";
  }
  return "info";
}

void init(std::string_view program, std::optional<Level> level, Format format) {
  Logger& s = state();
  std::lock_guard lock(s.mu);
  auto sinks = s.logger.load()->sinks();
  auto logger = std::make_shared<spdlog::logger>(std::string(program), sinks.begin(), sinks.end());
  logger->set_formatter(make_formatter(format));
  if (level) s.level = *level;
  logger->set_level(to_spdlog(s.level));
  logger->flush_on(spdlog::level::trace);
  s.logger = std::move(logger);
}

void set_level(Level level) {
  Logger& s = state();
  std::lock_guard lock(s.mu);
  s.level = level;
  s.logger.load()->set_level(to_spdlog(level));
}

Level level() { return state().level.load(); }

bool enabled(Level level) { return level != Level::kOff && level >= state().level.load(); }

void write(Level level, std::string_view message) { state().logger.load()->log(to_spdlog(level), "{}", message); }

}  // namespace edt::log
