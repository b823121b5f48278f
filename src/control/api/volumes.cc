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
  if (!request.ok()) return request.error();
  return json_answer(201, ctx.service->create_volume(user, *request), volume_to_json);
}

Answer delete_volume(ApiContext& ctx, const Request& req, const User& user) {
  auto volume = ctx.service->delete_volume(user, req.matches[1]);
  if (!volume.ok()) return volume.error();
  return json_reply(200, {{"deleted", volume->name}});
}

}  // namespace edt::control::handlers
