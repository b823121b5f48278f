// Handlers: /api/v1/images and /api/v1/gpus, what clusters are made of.
#include <httplib.h>

#include "control/api/handlers.h"

namespace edt::control::handlers {

using nlohmann::json;

Answer list_images(ApiContext& ctx, const Request&, const User&) {
  json items = json::array();
  for (const auto& i : ctx.service->images()) items.push_back(image_to_json(i));
  return json_reply(200, {{"images", items}});
}

Answer register_image(ApiContext& ctx, const Request& req, const User& user) {
  auto body = json_body(req);
  if (!body.ok()) return body.error();
  Image image;
  if (auto r = parse_image_request(*body, &image)) return *r;
  auto registered = ctx.service->register_image(user, image);
  if (!registered.ok()) return registered.error();
  return json_reply(201, {{"name", registered->name}, {"root", registered->root}, {"frameworks", registered->frameworks}});
}

Answer list_gpus(ApiContext& ctx, const Request&, const User&) {
  json items = json::array();
  for (const auto& g : ctx.service->gpus()) items.push_back(gpu_to_json(g));
  return json_reply(200, {{"gpus", items}});
}

}  // namespace edt::control::handlers
