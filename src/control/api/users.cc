// Handlers: /api/v1/whoami, /api/v1/users and their tokens.
#include <charconv>

#include "common/units.h"
#include "control/api/handlers.h"

namespace edt::control::handlers {

using nlohmann::json;

namespace {

json token_json(const NewToken& made) {
  return {{"name", made.info.user}, {"token", made.token}, {"id", made.info.id}, {"expires_at", made.info.expires_at}};
}

// The token id in the path, or the NotFound a name that is no id gets.
Result<int64_t> token_id(const Request& req) {
  const std::string text = req.matches[2].str();
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || ptr != text.data() + text.size() || id < 1)
    return missing("id", "there is no token '" + text + "'", "use an id from edt token list");
  return id;
}

}  // namespace

Answer whoami(ApiContext&, const Request&, const User& user) { return json_reply(200, user_to_json(user)); }

Answer list_users(ApiContext& ctx, const Request&, const User& user) {
  auto users = ctx.service->users(user);
  if (!users.is_ok()) return users.status();
  json items = json::array();
  for (const auto& u : *users) items.push_back(user_to_json(u));
  return json_reply(200, {{"users", items}});
}

Answer create_user(ApiContext& ctx, const Request& req, const User& user) {
  auto name = read_body(req, parse_user_request);
  if (!name.is_ok()) return name.status();
  return json_answer(201, ctx.service->create_user(user, *name), token_json);
}

Answer delete_user(ApiContext& ctx, const Request& req, const User& user) {
  auto deleted = ctx.service->delete_user(user, req.matches[1].str());
  if (!deleted.is_ok()) return deleted.status();
  return json_reply(200, {{"deleted", deleted->name}});
}

Answer create_token(ApiContext& ctx, const Request& req, const User& user) {
  auto body = optional_json_body(req);
  if (!body.is_ok()) return body.status();
  TokenRequest request;
  EDT_RETURN_IF_ERROR(parse_token_request(*body, &request));
  return json_answer(201, ctx.service->create_token(user, req.matches[1].str(), request), token_json);
}

Answer list_tokens(ApiContext& ctx, const Request& req, const User& user) {
  auto tokens = ctx.service->tokens(user, req.matches[1].str());
  if (!tokens.is_ok()) return tokens.status();
  const int64_t now = unix_seconds();
  json items = json::array();
  for (const auto& t : *tokens) items.push_back(token_info_to_json(t, now));
  return json_reply(200, {{"tokens", items}});
}

Answer revoke_token(ApiContext& ctx, const Request& req, const User& user) {
  auto id = token_id(req);
  if (!id.is_ok()) return id.status();
  auto revoked = ctx.service->revoke_token(user, req.matches[1].str(), *id);
  if (!revoked.is_ok()) return revoked.status();
  return json_reply(200, {{"deleted", std::to_string(revoked->id)}});
}

}  // namespace edt::control::handlers
