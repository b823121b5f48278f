#include "common/log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace edt::log {
namespace {

// Runs `body` with stderr going to a temporary file and returns what it wrote.
template <typename Body>
std::string captured_stderr(Body body) {
  std::FILE* file = std::tmpfile();
  int saved = ::dup(2);
  ::dup2(::fileno(file), 2);
  body();
  ::dup2(saved, 2);
  ::close(saved);
  std::rewind(file);
  std::string text;
  for (int c; (c = std::fgetc(file)) != EOF;) text.push_back(static_cast<char>(c));
  std::fclose(file);
  return text;
}

TEST(Log, LevelsParseAndRefuseWhatTheyDoNotKnow) {
  EXPECT_EQ(parse_level("debug").value(), Level::kDebug);
  EXPECT_EQ(parse_level("warning").value(), Level::kWarn);
  EXPECT_EQ(parse_level("warn").value(), Level::kWarn);
  EXPECT_EQ(parse_level("off").value(), Level::kOff);
  auto bad = parse_level("loud");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'loud'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("debug"), std::string::npos);
}

TEST(Log, TextLinesNameTheProgramAndMarkWarnings) {
  std::string text = captured_stderr([] {
    init("edtx", Level::kInfo);
    debug("hidden {}", 1);
    info("worker {} exited with code {}", 3, 0);
    warn("slow");
    error("broken");
  });
  EXPECT_EQ(text, "edtx: worker 3 exited with code 0\nedtx: warning: slow\nedtx: error: broken\n");
}

TEST(Log, TheLevelCanBeLoweredAndTurnedOff) {
  std::string text = captured_stderr([] {
    init("edtx", Level::kInfo);
    set_level(Level::kDebug);
    EXPECT_TRUE(enabled(Level::kDebug));
    debug("shown");
    set_level(Level::kOff);
    error("not shown");
  });
  EXPECT_EQ(text, "edtx: shown\n");
}

TEST(Log, JsonLinesAreJsonWhateverTheMessageHolds) {
  std::string text = captured_stderr([] {
    init("edtd", Level::kInfo, Format::kJson);
    warn("a \"quoted\" \\ line\nwith a newline");
  });
  init("edt", Level::kInfo);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  auto line = nlohmann::json::parse(text);
  EXPECT_EQ(line["level"], "warning");
  EXPECT_EQ(line["program"], "edtd");
  EXPECT_EQ(line["message"], "a \"quoted\" \\ line\nwith a newline");
  EXPECT_EQ(line["time"].get<std::string>().size(), std::string("2026-12-01T07:31:01.123456Z").size());
}

TEST(Log, JsonLinesReplaceBytesThatAreNotUtf8) {
  std::string text = captured_stderr([] {
    init("edtd", Level::kInfo, Format::kJson);
    warn("no cluster 'a\xFF\xC3'");
  });
  init("edt", Level::kInfo);
  auto line = nlohmann::json::parse(text);  // throws on ill-formed UTF-8
  EXPECT_EQ(line["message"], "no cluster 'a\xEF\xBF\xBD\xEF\xBF\xBD'");
}

}  // namespace
}  // namespace edt::log
