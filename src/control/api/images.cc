// Handlers: /api/v1/images (registered roots, imports and pulls into the
// image store, removal) and /api/v1/gpus, what clusters are made of.
#include "control/api/handlers.h"

namespace edt::control::handlers {

using nlohmann::json;

Answer list_images(ApiContext& ctx, const Request&, const User&) {
  json items = json::array();
  for (const auto& i : ctx.service->images()) items.push_back(image_to_json(i));
  return json_reply(200, {{"images", items}});
}

Answer register_image(ApiContext& ctx, const Request& req, const User& user) {
  auto image = read_body(req, parse_image_request);
  if (!image.is_ok()) return image.status();
  return json_answer(201, ctx.service->register_image(user, *image), [](const Image& made) {
    return json{{"name", made.name}, {"root", made.root}, {"frameworks", made.frameworks}};
  });
}

Answer import_image(ApiContext& ctx, const Request& req, const User& user) {
  auto request = read_body(req, parse_image_import_request);
  if (!request.is_ok()) return request.status();
  return json_answer(201, ctx.service->import_image(user, *request), image_to_json);
}

Answer pull_image(ApiContext& ctx, const Request& req, const User& user) {
  auto request = read_body(req, parse_image_pull_request);
  if (!request.is_ok()) return request.status();
  return json_answer(201, ctx.service->pull_image(user, *request), [](const PulledImage& pulled) {
    return json{{"image", image_to_json(pulled.image)},
                {"fetched_blobs", pulled.fetched_blobs},
                {"fetched_bytes", pulled.fetched_bytes},
                {"reused_blobs", pulled.reused_blobs}};
  });
}

Answer list_image_pulls(ApiContext& ctx, const Request&, const User&) {
  json items = json::array();
  for (const auto& p : ctx.service->image_pulls()) {
    items.push_back({{"name", p.name}, {"reference", p.reference}, {"started_at", p.started_at}, {"phase", p.phase},
                     {"layers", p.layers}, {"layers_fetched", p.layers_fetched}, {"layers_unpacked", p.layers_unpacked},
                     {"bytes", p.bytes}, {"bytes_fetched", p.bytes_fetched}});
  }
  return json_reply(200, {{"pulls", items}});
}

Answer delete_image(ApiContext& ctx, const Request& req, const User& user) {
  auto image = ctx.service->delete_image(user, req.matches[1]);
  if (!image.is_ok()) return image.status();
  return json_reply(200, {{"deleted", image->name}});
}

Answer list_gpus(ApiContext& ctx, const Request&, const User& user) {
  json items = json::array();
  for (const auto& g : ctx.service->gpus(user)) items.push_back(gpu_to_json(g));
  return json_reply(200, {{"gpus", items}});
}

}  // namespace edt::control::handlers
