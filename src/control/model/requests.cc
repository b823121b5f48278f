#include "control/model/requests.h"

#include <algorithm>

namespace edt::control {

using nlohmann::json;

namespace {

// body[key] as a non-empty string, or a refusal saying what to send.
Refusal want_name(const json& body, std::string* out, const std::string& example) {
  if (!body.contains("name") || !body["name"].is_string())
    return invalid("name", "name is missing", "send " + example);
  *out = body["name"].get<std::string>();
  return std::nullopt;
}

}  // namespace

Refusal parse_volume_request(const json& body, VolumeRequest* out) {
  if (auto r = want_name(body, &out->name, "{\"name\": \"data\"}")) return r;
  if (auto r = check_resource_name(out->name, "name", "volume")) return r;
  out->has_host_path = body.contains("host_path");
  if (out->has_host_path && body["host_path"].is_string()) out->host_path = body["host_path"].get<std::string>();
  return std::nullopt;
}

Refusal parse_image_request(const json& body, Image* out) {
  if (auto r = want_name(body, &out->name, "{\"name\": ..., \"root\": ..., \"frameworks\": [...]}")) return r;
  if (auto r = check_resource_name(out->name, "name", "image")) return r;
  out->root = "/";
  if (body.contains("root")) {
    if (!body["root"].is_string())
      return invalid("root", "root must be a string",
                     "give the absolute path of an unpacked root file system, or / for the host's");
    out->root = body["root"].get<std::string>();
  }
  if (!body.contains("frameworks") || !body["frameworks"].is_array() || body["frameworks"].empty())
    return invalid("frameworks", "frameworks must be a non-empty list", "e.g. [\"deepspeed\"]");
  const auto& known = known_frameworks();
  for (const auto& f : body["frameworks"]) {
    if (!f.is_string() || std::find(known.begin(), known.end(), f.get<std::string>()) == known.end())
      return invalid("frameworks", "unknown framework " + f.dump(), "use horovod, deepspeed, megatron or slurm");
    out->frameworks.push_back(f.get<std::string>());
  }
  return std::nullopt;
}

Refusal parse_user_request(const json& body, std::string* name) {
  if (auto r = want_name(body, name, "{\"name\": \"alice\"}")) return r;
  return check_resource_name(*name, "name", "user");
}

Refusal parse_job_request(const json& body, JobRequest* out) {
  if (!body.contains("command") || !body["command"].is_string() || body["command"].get<std::string>().empty())
    return invalid("command", "command must be a non-empty string", "send {\"command\": \"hostname\"}");
  out->command = body["command"].get<std::string>();
  if (body.contains("container")) {
    if (!body["container"].is_string())
      return invalid("container", "container must be a string", "name a container of the cluster");
    out->container = body["container"].get<std::string>();
  }
  return std::nullopt;
}

}  // namespace edt::control
