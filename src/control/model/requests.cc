#include "control/model/requests.h"

#include <algorithm>

#include "control/model/cluster.h"
#include "control/model/fields.h"
#include "edt_api/contract.h"

namespace edt::control {

using nlohmann::json;

namespace fields = api::fields;

Status parse_volume_request(const json& object, VolumeRequest* out) {
  Fields body(object, "");
  EDT_RETURN_IF_ERROR(body.only(fields::VolumeRequest::kProperties));
  EDT_RETURN_IF_ERROR(body.text("name", &out->name, Presence::kRequired));
  EDT_RETURN_IF_ERROR(check_resource_name(out->name, "name", "volume"));
  out->has_host_path = body.has("host_path");
  return body.text("host_path", &out->host_path, Presence::kOptional);
}

namespace {

// The image's frameworks: a non-empty list of known ones.
Status parse_frameworks(const json& list, std::vector<std::string>* out) {
  const auto& known = known_frameworks();
  const std::string fix = "use horovod, deepspeed, megatron or slurm, e.g. [\"deepspeed\"]";
  if (list.empty()) return invalid("frameworks", "'frameworks' is an empty list", fix);
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = "frameworks[" + std::to_string(i) + "]";
    if (!list[i].is_string()) return Fields::wrong_type(at, list[i], "a string", "\"horovod\"");
    const std::string name = list[i].get<std::string>();
    if (std::find(known.begin(), known.end(), name) == known.end())
      return invalid(at, "unknown framework '" + name + "'", fix);
    out->push_back(name);
  }
  return Status::ok();
}

}  // namespace

Status parse_image_request(const json& object, Image* out) {
  Fields body(object, "");
  EDT_RETURN_IF_ERROR(body.only(fields::ImageRequest::kProperties));
  EDT_RETURN_IF_ERROR(body.text("name", &out->name, Presence::kRequired));
  EDT_RETURN_IF_ERROR(check_resource_name(out->name, "name", "image"));
  out->root = "/";
  EDT_RETURN_IF_ERROR(body.text("root", &out->root, Presence::kOptional));
  const json* frameworks = nullptr;
  EDT_RETURN_IF_ERROR(body.array("frameworks", &frameworks, Presence::kRequired));
  return parse_frameworks(*frameworks, &out->frameworks);
}

Status parse_image_import_request(const json& object, ImageImport* out) {
  Fields body(object, "");
  EDT_RETURN_IF_ERROR(body.only(fields::ImageImportRequest::kProperties));
  EDT_RETURN_IF_ERROR(body.text("name", &out->name, Presence::kRequired));
  EDT_RETURN_IF_ERROR(check_resource_name(out->name, "name", "image"));
  EDT_RETURN_IF_ERROR(body.text("path", &out->path, Presence::kRequired));
  const json* frameworks = nullptr;
  EDT_RETURN_IF_ERROR(body.array("frameworks", &frameworks, Presence::kOptional));
  return frameworks ? parse_frameworks(*frameworks, &out->frameworks) : Status::ok();
}

Status parse_image_pull_request(const json& object, ImagePull* out) {
  Fields body(object, "");
  EDT_RETURN_IF_ERROR(body.only(fields::ImagePullRequest::kProperties));
  EDT_RETURN_IF_ERROR(body.text("reference", &out->reference, Presence::kRequired));
  EDT_RETURN_IF_ERROR(body.text("name", &out->name, Presence::kOptional));
  if (!out->name.empty()) EDT_RETURN_IF_ERROR(check_resource_name(out->name, "name", "image"));
  EDT_RETURN_IF_ERROR(body.text("username", &out->username, Presence::kOptional));
  EDT_RETURN_IF_ERROR(body.text("password", &out->password, Presence::kOptional));
  const json* frameworks = nullptr;
  EDT_RETURN_IF_ERROR(body.array("frameworks", &frameworks, Presence::kOptional));
  return frameworks ? parse_frameworks(*frameworks, &out->frameworks) : Status::ok();
}

Status parse_user_request(const json& object, std::string* name) {
  Fields body(object, "");
  EDT_RETURN_IF_ERROR(body.only(fields::UserRequest::kProperties));
  EDT_RETURN_IF_ERROR(body.text("name", name, Presence::kRequired));
  return check_resource_name(*name, "name", "user");
}

namespace {

// "90d" -> 90 days, with the units and bounds of the contract's TokenLifetime.
Status parse_token_lifetime(const json& value, std::chrono::seconds* out) {
  namespace lifetime = api::limits::TokenLifetime;
  const std::string field(fields::TokenRequest::expires_in);
  const std::string fix = "write a whole number with a unit (s, m, h, d), from 1s to " +
                          std::to_string(lifetime::maximum_ms / 86400000) + "d, e.g. \"90d\"";
  int64_t ms = 0;
  if (value.is_number_integer()) {
    // Past int64 (unsigned) or below 0: out of range either way.
    const bool in_range = value.is_number_unsigned() ? value.get<uint64_t>() <= uint64_t(lifetime::maximum_ms / 1000)
                                                     : value.get<int64_t>() >= 0;
    if (!in_range || value.get<int64_t>() > lifetime::maximum_ms / 1000)
      return invalid(field, field + " of " + value.dump() + " s is out of range", fix);
    ms = value.get<int64_t>() * 1000;
  } else if (value.is_string()) {
    const std::string text = value.get<std::string>();
    const size_t number_end = std::min(text.find_first_not_of("0123456789"), text.size());
    if (number_end == 0 || number_end > 12)
      return invalid(field, field + " '" + text + "' is not a whole number with a unit", fix);
    const std::string suffix = text.substr(number_end);
    auto unit = std::find_if(lifetime::units.begin(), lifetime::units.end(),
                             [&](const auto& u) { return u.suffix == suffix; });
    if (unit == lifetime::units.end())
      return invalid(field, field + " '" + text + "' has an unknown unit '" + suffix + "'", fix);
    const int64_t number = std::stoll(text.substr(0, number_end));  // at most 12 digits: fits
    if (number > lifetime::maximum_ms / static_cast<int64_t>(unit->ms))
      return invalid(field, field + " of '" + text + "' is out of range", fix);
    ms = number * static_cast<int64_t>(unit->ms);
  } else {
    return Fields::wrong_type(field, value, "a duration", "\"90d\"");
  }
  if (ms < lifetime::minimum_ms || ms > lifetime::maximum_ms)
    return invalid(field, field + " of " + value.dump() + " is out of range", fix);
  *out = std::chrono::seconds(ms / 1000);
  return Status::ok();
}

}  // namespace

Status parse_token_request(const json& object, TokenRequest* out) {
  Fields body(object, "");
  EDT_RETURN_IF_ERROR(body.only(fields::TokenRequest::kProperties));
  EDT_RETURN_IF_ERROR(body.text("description", &out->description, Presence::kOptional));
  if (out->description.size() > api::limits::TokenDescription::max_length)
    return invalid("description", "description is " + std::to_string(out->description.size()) + " bytes, over " +
                                      std::to_string(api::limits::TokenDescription::max_length),
                   "describe the token in fewer words, e.g. \"ci runner\"");
  if (!body.has("expires_in")) return Status::ok();
  std::chrono::seconds lifetime{0};
  EDT_RETURN_IF_ERROR(parse_token_lifetime(object["expires_in"], &lifetime));
  out->expires_in = lifetime;
  return Status::ok();
}

Status parse_job_request(const json& object, JobRequest* out) {
  Fields body(object, "");
  EDT_RETURN_IF_ERROR(body.only(fields::JobRequest::kProperties));
  EDT_RETURN_IF_ERROR(body.text("command", &out->command, Presence::kRequired));
  if (out->command.empty())
    return invalid("command", "'command' is empty", "send {\"command\": \"hostname\"}");
  std::string container;
  EDT_RETURN_IF_ERROR(body.text("container", &container, Presence::kOptional));
  if (body.has("container")) out->container = container;
  if (!body.has("cwd")) return Status::ok();
  std::string cwd;
  EDT_RETURN_IF_ERROR(body.text("cwd", &cwd, Presence::kOptional));
  EDT_RETURN_IF_ERROR(check_container_path(cwd, "cwd"));
  out->cwd = cwd;
  return Status::ok();
}

}  // namespace edt::control
