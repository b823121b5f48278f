// edt team create|list|get|delete, edt team quota set|delete (the admin's),
// and edt user team USER TEAM|--none (the admin's): the scheduler's shares
// (docs/scheduling.md). A user's `team list`/`team get` shows their own
// team and its usage per GPU model.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "edt_api/contract.h"

namespace edt::cli {
namespace {

using nlohmann::json;
namespace team_field = api::fields::Team;
namespace usage_field = api::fields::QuotaUsage;

// The API's largest quota count: as a borrow limit, no bound in practice.
constexpr int64_t kUnlimited = api::limits::QuotaCount::maximum;

struct TeamOptions {
  std::string name, model, borrow, output, user;
  int64_t guaranteed = 0;
  bool none = false;
};

std::string borrow_text(int64_t limit) { return limit >= kUnlimited ? "unlimited" : std::to_string(limit); }

std::string members_text(const json& team) {
  std::string out;
  for (const auto& m : team[key(team_field::members)]) out += (out.empty() ? "" : ", ") + m.get<std::string>();
  return out.empty() ? "-" : out;
}

// One row per (team, GPU model): the quota and what the team does with it.
void print_teams(const json& teams) {
  std::vector<std::vector<std::string>> rows = {
      {"TEAM", "MEMBERS", "GPU MODEL", "GUARANTEED", "BORROW LIMIT", "IN USE", "BORROWED", "PENDING"}};
  for (const auto& t : teams) {
    const std::string name = t[key(team_field::name)], members = members_text(t);
    const json& quotas = t[key(team_field::quotas)];
    if (quotas.empty()) rows.push_back({name, members, "-", "-", "-", "-", "-", "-"});
    for (const auto& q : quotas)
      rows.push_back({name, members, q[key(usage_field::gpu_model)],
                      std::to_string(q[key(usage_field::guaranteed)].get<int64_t>()),
                      borrow_text(q[key(usage_field::borrow_limit)].get<int64_t>()),
                      std::to_string(q[key(usage_field::in_use)].get<int64_t>()),
                      std::to_string(q[key(usage_field::borrowed)].get<int64_t>()),
                      std::to_string(q[key(usage_field::pending)].get<int64_t>())});
  }
  print_table(rows);
}

// Sends one request; prints the team it answers (or `done` when given).
int team_call(const std::string& method, const std::string& path, const json* body, const TeamOptions& o,
              const std::string& done = "") {
  Client client(load_endpoint());
  json out;
  if (auto f = client.call(method, path, body, done.empty() ? &out : nullptr)) return fail(*f);
  if (!done.empty()) {
    printf("%s\n", done.c_str());
    return 0;
  }
  if (print_json_if_asked(o.output, out)) return 0;
  print_teams(json::array({out}));
  return 0;
}

int list_teams(const TeamOptions& o) {
  Client client(load_endpoint());
  json out;
  if (auto f = client.call("GET", "/teams", nullptr, &out)) return fail(*f);
  const json& teams = out[key(api::fields::TeamList::teams)];
  if (print_json_if_asked(o.output, teams)) return 0;
  print_teams(teams);
  return 0;
}

int create_team(const TeamOptions& o) {
  const json body = {{key(api::fields::TeamRequest::name), o.name}};
  return team_call("POST", "/teams", &body, o);
}

int get_team(const TeamOptions& o) { return team_call("GET", "/teams/" + o.name, nullptr, o); }

int delete_team(const TeamOptions& o) {
  return team_call("DELETE", "/teams/" + o.name, nullptr, o, "team " + o.name + " deleted; its members have no team");
}

// --borrow: a count, or "unlimited".
std::string check_borrow(const std::string& text) {
  if (text == "unlimited") return "";
  try {
    size_t used = 0;
    const long n = std::stol(text, &used);
    if (used == text.size() && n >= 0 && n <= kUnlimited) return "";
  } catch (...) {
  }
  return "'" + text + "' is not a GPU count; write a number from 0 to " + std::to_string(kUnlimited) +
         " or 'unlimited'";
}

int set_quota(const TeamOptions& o) {
  namespace request = api::fields::QuotaRequest;
  const int64_t borrow = o.borrow == "unlimited" ? kUnlimited : std::stol(o.borrow);
  const json body = {{key(request::guaranteed), o.guaranteed}, {key(request::borrow_limit), borrow}};
  return team_call("PUT", "/teams/" + o.name + "/quotas/" + o.model, &body, o);
}

int delete_quota(const TeamOptions& o) {
  return team_call("DELETE", "/teams/" + o.name + "/quotas/" + o.model, nullptr, o);
}

int set_user_team(const TeamOptions& o) {
  if (o.none == !o.name.empty())
    return usage_error("name a team, or --none, not both", "write e.g. edt user team alice ml");
  const json body = {{key(api::fields::UserTeam::team), o.name}};
  Client client(load_endpoint());
  if (auto f = client.call("PUT", "/users/" + o.user + "/team", &body, nullptr)) return fail(*f);
  if (o.none)
    printf("user %s is in no team\n", o.user.c_str());
  else
    printf("user %s is in team %s\n", o.user.c_str(), o.name.c_str());
  return 0;
}

// Adds a subcommand that runs `run` with `o` once parsed.
CLI::App* add_run(CLI::App* parent, const std::string& name, const std::string& help, Action* action,
                  int (*run)(const TeamOptions&), std::shared_ptr<TeamOptions> o) {
  auto* cmd = parent->add_subcommand(name, help);
  cmd->callback([o, action, run] { *action = [o, run] { return run(*o); }; });
  return cmd;
}

void add_quota_group(CLI::App* team, Action* action) {
  auto* quota = team->add_subcommand("quota", "a team's GPU quota per model (admin)");
  quota->require_subcommand(1);
  auto o = std::make_shared<TeamOptions>();
  const std::string range = " (0 to " + std::to_string(kUnlimited) + ")";
  auto* set = add_run(quota, "set", "set a team's guaranteed GPUs and borrowing limit for a GPU model", action,
                      set_quota, o);
  set->add_option("team", o->name)->required();
  set->add_option("model", o->model, "a GPU model, as edt gpus names it")->required();
  set->add_option("--guaranteed", o->guaranteed, "GPUs that are the team's whenever it asks" + range)
      ->required()
      ->check(CLI::Range(int64_t{0}, kUnlimited));
  set->add_option("--borrow", o->borrow, "GPUs more it may hold while no one's guarantee needs them, or unlimited")
      ->required()
      ->check(check_borrow);
  add_output_option(set, &o->output);
  auto* remove = add_run(quota, "delete", "remove a team's quota for a model (no guarantee, no limit there)", action,
                         delete_quota, o);
  remove->add_option("team", o->name)->required();
  remove->add_option("model", o->model)->required();
  add_output_option(remove, &o->output);
}

}  // namespace

void add_team_commands(CLI::App& app, Action* action) {
  auto* team = app.add_subcommand("team", "teams and their GPU quotas (the admin's; a user sees their own team)");
  team->require_subcommand(1);
  auto o = std::make_shared<TeamOptions>();
  add_run(team, "create", "create a team (admin)", action, create_team, o)->add_option("name", o->name)->required();
  add_output_option(add_run(team, "list", "list teams with their quotas and usage", action, list_teams, o),
                    &o->output);
  auto* get = add_run(team, "get", "show a team: members, quotas and usage per GPU model", action, get_team, o);
  get->add_option("name", o->name)->required();
  add_output_option(get, &o->output);
  add_run(team, "delete", "delete a team (admin); its members have no team after", action, delete_team, o)
      ->add_option("name", o->name)
      ->required();
  add_quota_group(team, action);
  // edt user team: the user group's (user_commands.cc), added to it here.
  CLI::App* user = app.get_subcommand("user");
  auto* member = add_run(user, "team", "put a user in a team, or with --none in no team (admin)", action,
                         set_user_team, o);
  member->add_option("user", o->user)->required();
  member->add_option("team", o->name);
  member->add_flag("--none", o->none, "take the user out of their team");
}

}  // namespace edt::cli
