// Handlers: /api/v1/teams, their quotas, and a user's team.
#include "control/api/handlers.h"
#include "control/model/teams.h"

namespace edt::control::handlers {

using nlohmann::json;

Answer list_teams(ApiContext& ctx, const Request&, const User& user) {
  auto teams = ctx.service->teams(user);
  if (!teams.is_ok()) return teams.status();
  json items = json::array();
  for (const auto& t : *teams) items.push_back(team_to_json(t));
  return json_reply(200, {{"teams", items}});
}

Answer create_team(ApiContext& ctx, const Request& req, const User& user) {
  auto name = read_body(req, parse_team_request);
  if (!name.is_ok()) return name.status();
  return json_answer(201, ctx.service->create_team(user, *name), team_to_json);
}

Answer get_team(ApiContext& ctx, const Request& req, const User& user) {
  return json_answer(200, ctx.service->team(user, req.matches[1].str()), team_to_json);
}

Answer delete_team(ApiContext& ctx, const Request& req, const User& user) {
  auto deleted = ctx.service->delete_team(user, req.matches[1].str());
  if (!deleted.is_ok()) return deleted.status();
  return json_reply(200, {{"deleted", deleted->name}});
}

Answer set_quota(ApiContext& ctx, const Request& req, const User& user) {
  auto body = json_body(req);
  if (!body.is_ok()) return body.status();
  Quota quota{req.matches[1].str(), req.matches[2].str()};
  EDT_RETURN_IF_ERROR(parse_quota_request(*body, &quota));
  return json_answer(200, ctx.service->set_quota(user, quota), team_to_json);
}

Answer delete_quota(ApiContext& ctx, const Request& req, const User& user) {
  return json_answer(200, ctx.service->delete_quota(user, req.matches[1].str(), req.matches[2].str()), team_to_json);
}

Answer set_user_team(ApiContext& ctx, const Request& req, const User& user) {
  auto team = read_body(req, parse_user_team);
  if (!team.is_ok()) return team.status();
  return json_answer(200, ctx.service->set_user_team(user, req.matches[1].str(), *team), user_to_json);
}

}  // namespace edt::control::handlers
