// Fields: how every request body's object is read, field by field, so that
// every resource refuses alike (clusters, scales, jobs, volumes, images,
// users, tokens, terminals): a field its schema does not list, a field of
// the wrong JSON type, a required field missing, each is a kInvalidArgument refusal
// naming the field by its JSON path ("gpu.count", "mounts[1].path") and
// saying what to send. The fields a schema lists come from the API contract
// (edt_api/contract.h, fields::<Schema>::kProperties).
//
// Values are checked for type only; what a value may be (a name's pattern,
// a count's range) is the caller's check after. Never throws.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "control/model/error.h"

namespace edt::control {

// "a, b, c": names as a refusal lists them (the fields, the choices).
template <typename Names>
std::string comma_list(const Names& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

enum class Presence { kOptional, kRequired };

class Fields {
 public:
  // Reads `object` (it must outlive this); `at` is its path ("" for the
  // body, "gpu", "mounts[0]").
  Fields(const nlohmann::json& object, std::string at);

  // Refuses a value that is not an object, then any key not in `listed`.
  Status only(std::span<const std::string_view> listed) const;

  bool has(std::string_view key) const;
  // The path of `key` in the body: "count" at "gpu" is "gpu.count".
  std::string path(std::string_view key) const;

  // Each reads `key` into `out` when present and of its type, leaves `out`
  // as it is when absent and optional, and refuses otherwise.
  Status text(std::string_view key, std::string* out, Presence presence) const;
  Status integer(std::string_view key, int64_t* out, Presence presence) const;
  Status boolean(std::string_view key, bool* out, Presence presence) const;
  // Arrays and objects as they are (nullptr when absent and optional), for
  // the caller to read on.
  Status array(std::string_view key, const nlohmann::json** out, Presence presence) const;
  Status object(std::string_view key, const nlohmann::json** out, Presence presence) const;

  // The refusal of a value at `field` that is not of type `want` ("a
  // string", "a whole number", ...), with `example` as what to send.
  static Status wrong_type(const std::string& field, const nlohmann::json& value, const std::string& want,
                          const std::string& example);

 private:
  // The value at `key`; nullptr and no refusal when absent and optional.
  Status find(std::string_view key, Presence presence, const nlohmann::json** out) const;

  const nlohmann::json& object_;
  std::string at_;
};

}  // namespace edt::control
