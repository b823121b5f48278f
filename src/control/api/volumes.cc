// Handlers: /api/v1/volumes.
#include "control/api/handlers.h"

namespace edt::control::handlers {

using nlohmann::json;

Answer list_volumes(ApiContext& ctx, const Request&, const User& user) {
  json items = json::array();
  for (const auto& v : ctx.service->volumes(user)) items.push_back(volume_to_json(v));
  return json_reply(200, {{"volumes", items}});
}

Answer create_volume(ApiContext& ctx, const Request& req, const User& user) {
  auto request = read_body(req, parse_volume_request);
  if (!request.is_ok()) return request.status();
  return json_answer(201, ctx.service->create_volume(user, *request), volume_to_json);
}

Answer delete_volume(ApiContext& ctx, const Request& req, const User& user) {
  auto volume = ctx.service->delete_volume(user, req.matches[1]);
  if (!volume.is_ok()) return volume.status();
  return json_reply(200, {{"deleted", volume->name}});
}

Answer upload_volume_file(ApiContext& ctx, const Request& req, const User& user) {
  const std::string fix = "name the file with ?path=, e.g. PUT /api/v1/volumes/data/files?path=dir/train.csv";
  if (req.params.count("path") != 1)
    return malformed("path", "the query parameter 'path' is missing or given more than once", fix);
  for (const auto& [key, value] : req.params)
    if (key != "path") return malformed(key, "the query parameter '" + key + "' is not read here", fix);
  auto file = ctx.service->upload_file(user, req.matches[1], req.get_param_value("path"), req.body);
  if (!file.is_ok()) return file.status();
  return json_reply(200, {{"volume", file->volume}, {"path", file->path}, {"bytes", file->bytes}});
}

}  // namespace edt::control::handlers
