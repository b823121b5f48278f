// Handlers: /api/v1/volumes.
#include <httplib.h>

#include "control/api/handlers.h"

namespace edt::control::handlers {

using nlohmann::json;

Answer list_volumes(ApiContext& ctx, const Request&, const User& user) {
  json items = json::array();
  for (const auto& v : ctx.service->volumes(user)) items.push_back(volume_to_json(v));
  return json_reply(200, {{"volumes", items}});
}

Answer create_volume(ApiContext& ctx, const Request& req, const User& user) {
  auto body = json_body(req);
  if (!body.ok()) return body.error();
  VolumeRequest request;
  if (auto r = parse_volume_request(*body, &request)) return *r;
  auto volume = ctx.service->create_volume(user, request);
  if (!volume.ok()) return volume.error();
  return json_reply(201, volume_to_json(*volume));
}

Answer delete_volume(ApiContext& ctx, const Request& req, const User& user) {
  auto volume = ctx.service->delete_volume(user, req.matches[1]);
  if (!volume.ok()) return volume.error();
  return json_reply(200, {{"deleted", volume->name}});
}

}  // namespace edt::control::handlers
