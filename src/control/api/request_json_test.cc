#include "control/api/request_json.h"

#include <gtest/gtest.h>

#include <string>

#include "common/utf8.h"

namespace edt::control {
namespace {

using nlohmann::json;

Status refused(const std::string& text, size_t max_depth = 32) {
  auto got = parse_request_json(text, JsonLimits{max_depth});
  EXPECT_FALSE(got.is_ok()) << text;
  return got.is_ok() ? Status{} : got.status();
}

TEST(RequestJson, ReadsWhatIsWithinTheLimits) {
  auto got = parse_request_json(R"({"a": [1, {"b": null}], "c": "\u00e9", "d": 1.5, "e": -3, "f": true})", {});
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ(*got, json::parse(R"({"a": [1, {"b": null}], "c": "\u00e9", "d": 1.5, "e": -3, "f": true})"));
  EXPECT_TRUE(parse_request_json(std::string(3, '[') + std::string(3, ']'), JsonLimits{3}).is_ok());
  EXPECT_TRUE(parse_request_json(R"({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]})", {}).is_ok());  // same key, other objects
}

TEST(RequestJson, RefusesDepthBeyondTheLimitWithoutRecursing) {
  const Status deep = refused(R"({"frameworks": )" + std::string(100000, '[') + std::string(100000, ']') + "}");
  EXPECT_EQ(deep.code(), StatusCode::kMalformed);
  EXPECT_EQ(deep.field(), "frameworks[0][0][0][0][0][0][0]...");
  EXPECT_NE(deep.message().find("more than 32 deep"), std::string::npos) << deep.message();
  EXPECT_EQ(refused(R"({"a": {"b": [{"c": 1}]}})", 3).field(), "a.b[0]");
  EXPECT_EQ(refused("[[[[]]]]", 3).field(), "[0][0][0]");
}

TEST(RequestJson, RefusesAKeyTwiceNamingWhere) {
  const Status twice = refused(R"({"name": "a", "name": "b"})");
  EXPECT_EQ(twice.field(), "name");
  EXPECT_EQ(twice.message(), "the key 'name' appears twice in the body");
  EXPECT_EQ(refused(R"({"gpu": {"count": 1, "count": 2}})").field(), "gpu.count");
  EXPECT_EQ(refused(R"({"mounts": [{"v": 1}, {"v": 1, "v": 2}]})").field(), "mounts[1].v");
  EXPECT_EQ(refused(R"({"mounts": [{"v": 1}, {"v": 1, "v": 2}]})").message(),
            "the key 'v' appears twice in 'mounts[1]'");
}

TEST(RequestJson, SyntaxErrorsSayWhereAndQuoteOnlyUtf8) {
  EXPECT_EQ(refused("").message(), "the request body is empty");
  EXPECT_EQ(refused(" \r\n").message(), "the request body is empty");
  const Status broken = refused(R"({"name": "a", )");
  EXPECT_EQ(broken.code(), StatusCode::kMalformed);
  EXPECT_NE(broken.message().find("not valid JSON: parse error at line 1, column 15"), std::string::npos) << broken.message();
  const Status bytes = refused("{\"name\": \"\xff\xfe\"}");
  EXPECT_TRUE(utf8::is_valid(bytes.message())) << bytes.message();
  EXPECT_NE(bytes.message().find("UTF-8"), std::string::npos) << bytes.message();
  EXPECT_LT(refused("\"" + std::string(100000, 'x') + "\xff\"").message().size(), 400u);
  EXPECT_FALSE(refused("{} {}").message().empty());
}

}  // namespace
}  // namespace edt::control
