#include "control/model/fields.h"

#include <algorithm>

namespace edt::control {

using nlohmann::json;

namespace {

// "a number", "an object", "null": what a JSON value is, for people.
std::string kind_of(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "a list";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_float: return "a fraction";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "a whole number";
    default: return "binary data";
  }
}

}  // namespace

Fields::Fields(const json& object, std::string at) : object_(object), at_(std::move(at)) {}

Status Fields::wrong_type(const std::string& field, const json& value, const std::string& want,
                         const std::string& example) {
  const std::string name = field.empty() ? "the request body" : "'" + field + "'";
  return invalid(field, name + " must be " + want + ", not " + kind_of(value), "send e.g. " + example);
}

Status Fields::only(std::span<const std::string_view> listed) const {
  if (!object_.is_object()) {
    Status error = wrong_type(at_, object_, "an object", "{...} with the fields " + comma_list(listed));
    if (!at_.empty()) return error;
    // Not a body this API reads at all.
    return malformed(error.field(), error.message(), error.fix());
  }
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (std::find(listed.begin(), listed.end(), it.key()) == listed.end())
      return invalid(path(it.key()), "unknown field '" + path(it.key()) + "'",
                     listed.empty() ? "send no fields here" : "remove it; the fields here are: " + comma_list(listed));
  }
  return Status::ok();
}

bool Fields::has(std::string_view key) const { return object_.is_object() && object_.contains(key); }

std::string Fields::path(std::string_view key) const {
  return at_.empty() ? std::string(key) : at_ + "." + std::string(key);
}

Status Fields::find(std::string_view key, Presence presence, const json** out) const {
  *out = nullptr;
  if (has(key)) {
    *out = &object_.find(key).value();
    return Status::ok();
  }
  if (presence == Presence::kOptional) return Status::ok();
  return invalid(path(key), "'" + path(key) + "' is missing", "send it (see GET /api/v1/openapi.json)");
}

Status Fields::text(std::string_view key, std::string* out, Presence presence) const {
  const json* value = nullptr;
  EDT_RETURN_IF_ERROR(find(key, presence, &value));
  if (!value) return Status::ok();
  if (!value->is_string()) return wrong_type(path(key), *value, "a string", "\"...\", in quotes");
  *out = value->get<std::string>();
  return Status::ok();
}

Status Fields::integer(std::string_view key, int64_t* out, Presence presence) const {
  const json* value = nullptr;
  EDT_RETURN_IF_ERROR(find(key, presence, &value));
  if (!value) return Status::ok();
  if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    return invalid(path(key), "'" + path(key) + "' is " + value->dump() + ", too large", "send a smaller number");
  if (!value->is_number_integer()) return wrong_type(path(key), *value, "a whole number", "2, without quotes");
  *out = value->get<int64_t>();
  return Status::ok();
}

Status Fields::boolean(std::string_view key, bool* out, Presence presence) const {
  const json* value = nullptr;
  EDT_RETURN_IF_ERROR(find(key, presence, &value));
  if (!value) return Status::ok();
  if (!value->is_boolean()) return wrong_type(path(key), *value, "true or false", "true, without quotes");
  *out = value->get<bool>();
  return Status::ok();
}

Status Fields::array(std::string_view key, const json** out, Presence presence) const {
  EDT_RETURN_IF_ERROR(find(key, presence, out));
  if (*out && !(*out)->is_array()) return wrong_type(path(key), **out, "a list", "[...]");
  return Status::ok();
}

Status Fields::object(std::string_view key, const json** out, Presence presence) const {
  EDT_RETURN_IF_ERROR(find(key, presence, out));
  if (*out && !(*out)->is_object()) return wrong_type(path(key), **out, "an object", "{...}");
  return Status::ok();
}

}  // namespace edt::control
