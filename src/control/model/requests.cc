#include "control/model/requests.h"

#include <algorithm>

#include "control/model/fields.h"
#include "edt_api/contract.h"

namespace edt::control {

using nlohmann::json;

namespace fields = api::fields;

Refusal parse_volume_request(const json& object, VolumeRequest* out) {
  Fields body(object, "");
  if (auto r = body.only(fields::VolumeRequest::kProperties)) return r;
  if (auto r = body.text("name", &out->name, Presence::kRequired)) return r;
  if (auto r = check_resource_name(out->name, "name", "volume")) return r;
  out->has_host_path = body.has("host_path");
  return body.text("host_path", &out->host_path, Presence::kOptional);
}

namespace {

// The image's frameworks: a non-empty list of known ones.
Refusal parse_frameworks(const json& list, std::vector<std::string>* out) {
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
  return std::nullopt;
}

}  // namespace

Refusal parse_image_request(const json& object, Image* out) {
  Fields body(object, "");
  if (auto r = body.only(fields::ImageRequest::kProperties)) return r;
  if (auto r = body.text("name", &out->name, Presence::kRequired)) return r;
  if (auto r = check_resource_name(out->name, "name", "image")) return r;
  out->root = "/";
  if (auto r = body.text("root", &out->root, Presence::kOptional)) return r;
  const json* frameworks = nullptr;
  if (auto r = body.array("frameworks", &frameworks, Presence::kRequired)) return r;
  return parse_frameworks(*frameworks, &out->frameworks);
}

Refusal parse_user_request(const json& object, std::string* name) {
  Fields body(object, "");
  if (auto r = body.only(fields::UserRequest::kProperties)) return r;
  if (auto r = body.text("name", name, Presence::kRequired)) return r;
  return check_resource_name(*name, "name", "user");
}

Refusal parse_token_request(const json& object, TokenRequest*) {
  return Fields(object, "").only(fields::TokenRequest::kProperties);
}

Refusal parse_job_request(const json& object, JobRequest* out) {
  Fields body(object, "");
  if (auto r = body.only(fields::JobRequest::kProperties)) return r;
  if (auto r = body.text("command", &out->command, Presence::kRequired)) return r;
  if (out->command.empty())
    return invalid("command", "'command' is empty", "send {\"command\": \"hostname\"}");
  std::string container;
  if (auto r = body.text("container", &container, Presence::kOptional)) return r;
  if (body.has("container")) out->container = container;
  return std::nullopt;
}

}  // namespace edt::control
