// Handlers: /api/v1/whoami, /api/v1/users and their tokens.
#include "control/api/handlers.h"

namespace edt::control::handlers {

using nlohmann::json;

namespace {

json token_json(const NewToken& made) { return {{"name", made.user}, {"token", made.token}}; }

}  // namespace

Answer whoami(ApiContext&, const Request&, const User& user) { return json_reply(200, user_to_json(user)); }

Answer list_users(ApiContext& ctx, const Request&, const User& user) {
  auto users = ctx.service->users(user);
  if (!users.ok()) return users.error();
  json items = json::array();
  for (const auto& u : *users) items.push_back(user_to_json(u));
  return json_reply(200, {{"users", items}});
}

Answer create_user(ApiContext& ctx, const Request& req, const User& user) {
  auto name = read_body(req, parse_user_request);
  if (!name.ok()) return name.error();
  return json_answer(201, ctx.service->create_user(user, *name), token_json);
}

Answer create_token(ApiContext& ctx, const Request& req, const User& user) {
  auto body = optional_json_body(req);
  if (!body.ok()) return body.error();
  TokenRequest request;
  if (auto refused = parse_token_request(*body, &request)) return *refused;
  auto made = ctx.service->create_token(user, req.matches[1]);
  if (!made.ok()) return made.error();
  return json_reply(201, token_json(*made));
}

}  // namespace edt::control::handlers
