#include "control/api/request_json.h"

#include <optional>
#include <string>
#include <vector>

#include "common/utf8.h"

namespace edt::control {

using nlohmann::json;

namespace {

// How many path segments a refusal's field shows before "...".
constexpr size_t kShownSegments = 8;
// How much of the parser's own message a refusal quotes.
constexpr size_t kQuotedChars = 200;

const char* const kFix = "send a JSON object, e.g. {\"name\": \"a\"} (see GET /api/v1/openapi.json)";

// Builds the value as the parser reads it (json's SAX interface), refusing
// what is over the limits at the first event that shows it. Returning
// false stops the parser; error() says why.
class BoundedBuilder final : public json::json_sax_t {
 public:
  explicit BoundedBuilder(const JsonLimits& limits) : limits_(limits) {}

  bool null() override { return put(json(nullptr)); }
  bool boolean(bool value) override { return put(json(value)); }
  bool number_integer(number_integer_t value) override { return put(json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return put(json(value)); }
  bool number_float(number_float_t value, const string_t&) override { return put(json(value)); }
  bool string(string_t& value) override { return put(json(std::move(value))); }
  bool binary(binary_t&) override { return refuse("", "the request body holds binary data", kFix); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& name) override {
    if (open_.back()->contains(name))
      return refuse(path_to(segment_for_key(name)), "the key '" + name + "' appears twice in " + object_name(),
                    "send each key once");
    key_ = std::move(name);
    return true;
  }

  // e.what() says where: "[json.exception.parse_error.101] parse error at line 1, column 15: ...".
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    std::string what = e.what();
    if (auto end = what.find("] "); end != std::string::npos) what.erase(0, end + 2);
    if (what.size() > kQuotedChars) what = what.substr(0, kQuotedChars) + "...";
    return refuse("", "the request body is not valid JSON: " + utf8::sanitized(what), kFix);
  }

  json take() { return std::move(root_); }
  const Status& refusal() const { return refusal_; }  // OK while none

 private:
  // Adds `value` where the parser is: the root, the next element of the
  // open array, or the open object's pending key. Returns where it went.
  json* add(json value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    json& slot = parent[key_];
    slot = std::move(value);
    return &slot;
  }

  bool put(json value) {
    add(std::move(value));
    return true;
  }

  bool open(json empty) {
    const std::string segment = next_segment();
    if (open_.size() >= limits_.max_depth)
      return refuse(path_to(segment),
                    "the request body nests objects and arrays more than " + std::to_string(limits_.max_depth) +
                        " deep",
                    "no field of this API nests more than 4 deep; send the fields the document lists");
    open_.push_back(add(std::move(empty)));
    segments_.push_back(segment);
    return true;
  }

  bool close() {
    open_.pop_back();
    segments_.pop_back();
    return true;
  }

  // Where the next value goes, as a path segment: ".key", "[i]", or "" for the root.
  std::string next_segment() const {
    if (open_.empty()) return "";
    if (open_.back()->is_array()) return "[" + std::to_string(open_.back()->size()) + "]";
    return segment_for_key(key_);
  }

  static std::string segment_for_key(const std::string& name) { return "." + name; }

  // The field path of the open containers and then `last`, e.g. "mounts[0].path".
  std::string path_to(const std::string& last) const {
    std::string path;
    size_t shown = 0;
    for (const auto& s : segments_) {
      if (s.empty()) continue;
      if (++shown > kShownSegments) return strip_dot(path) + "...";
      path += s;
    }
    return strip_dot(path + last);
  }

  std::string object_name() const {
    const std::string path = path_to("");
    return path.empty() ? "the body" : "'" + path + "'";
  }

  static std::string strip_dot(std::string path) {
    if (!path.empty() && path[0] == '.') path.erase(0, 1);
    return path;
  }

  bool refuse(std::string field, std::string message, std::string fix) {
    refusal_ = malformed(utf8::sanitized(field), utf8::sanitized(message), std::move(fix));
    return false;
  }

  JsonLimits limits_;
  json root_;
  std::vector<json*> open_;           // the objects and arrays being read, outermost first
  std::vector<std::string> segments_;  // where each of open_ is in its parent
  std::string key_;                    // the open object's key whose value comes next
  Status refusal_;
};

}  // namespace

Result<json> parse_request_json(std::string_view bytes, const JsonLimits& limits) {
  if (bytes.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return malformed("", "the request body is empty", kFix);
  BoundedBuilder builder(limits);
  if (!json::sax_parse(bytes.begin(), bytes.end(), &builder)) {
    if (!builder.refusal().is_ok()) return builder.refusal();
    return malformed("", "the request body is not valid JSON", kFix);
  }
  return builder.take();
}

}  // namespace edt::control
