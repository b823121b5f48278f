// edt user create|list|delete (admin), edt token create|list|revoke (your
// own tokens; the admin's --user names anyone's).
#include <cstdio>
#include <ctime>
#include <memory>

#include "cli/commands.h"
#include "common/log.h"
#include "edt_api/contract.h"

namespace edt::cli {
namespace {

using nlohmann::json;

struct TokenOptions {
  std::string user;  // empty: the caller
  std::string expires_in, description, output;
  int64_t id = 0;
};

// "2026-12-01 16:30 UTC"; `zero` for 0.
std::string format_time(int64_t unix_seconds, const char* zero) {
  if (unix_seconds == 0) return zero;
  const time_t t = static_cast<time_t>(unix_seconds);
  tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", &utc);
  return text;
}

// The user whose tokens a command is about: --user, else whoever the token is.
std::optional<ApiFailure> token_owner(Client& client, const TokenOptions& o, std::string* user) {
  if (!o.user.empty()) {
    *user = o.user;
    return std::nullopt;
  }
  json me;
  if (auto f = client.call("GET", "/whoami", nullptr, &me)) return f;
  *user = me[key(api::fields::User::name)].get<std::string>();
  return std::nullopt;
}

int create_token(const TokenOptions& o) {
  namespace request = api::fields::TokenRequest;
  json body = json::object(), out;
  if (!o.expires_in.empty()) body[key(request::expires_in)] = o.expires_in;
  if (!o.description.empty()) body[key(request::description)] = o.description;
  Client client(load_endpoint());
  std::string user;
  if (auto f = token_owner(client, o, &user)) return fail(*f);
  if (auto f = client.call("POST", "/users/" + user + "/tokens", &body, &out)) return fail(*f);
  namespace token = api::fields::Token;
  log::info("token {} of {}, expires {}", out[key(token::id)].get<int64_t>(), user,
            format_time(out[key(token::expires_at)].get<int64_t>(), "never"));
  printf("%s\n", out[key(token::token)].get<std::string>().c_str());
  return 0;
}

int list_tokens(const TokenOptions& o) {
  namespace info = api::fields::TokenInfo;
  Client client(load_endpoint());
  std::string user;
  json out;
  if (auto f = token_owner(client, o, &user)) return fail(*f);
  if (auto f = client.call("GET", "/users/" + user + "/tokens", nullptr, &out)) return fail(*f);
  const json& tokens = out[key(api::fields::TokenList::tokens)];
  if (print_json_if_asked(o.output, tokens)) return 0;
  std::vector<std::vector<std::string>> rows = {{"ID", "DESCRIPTION", "CREATED", "EXPIRES", "STATE"}};
  for (const auto& t : tokens)
    rows.push_back({std::to_string(t[key(info::id)].get<int64_t>()), t[key(info::description)],
                    format_time(t[key(info::created_at)].get<int64_t>(), "-"),
                    format_time(t[key(info::expires_at)].get<int64_t>(), "never"),
                    t[key(info::expired)].get<bool>() ? "expired" : "valid"});
  print_table(rows);
  return 0;
}

int revoke_token(const TokenOptions& o) {
  Client client(load_endpoint());
  std::string user;
  if (auto f = token_owner(client, o, &user)) return fail(*f);
  if (auto f = client.call("DELETE", "/users/" + user + "/tokens/" + std::to_string(o.id), nullptr, nullptr))
    return fail(*f);
  printf("token %lld of %s revoked\n", static_cast<long long>(o.id), user.c_str());
  return 0;
}

int create_user(const std::string& name) {
  json body = {{key(api::fields::UserRequest::name), name}}, out;
  Client client(load_endpoint());
  if (auto f = client.call("POST", "/users", &body, &out)) return fail(*f);
  printf("%s\n", out[key(api::fields::Token::token)].get<std::string>().c_str());
  return 0;
}

int list_users(const std::string& output) {
  Client client(load_endpoint());
  json out;
  if (auto f = client.call("GET", "/users", nullptr, &out)) return fail(*f);
  const json& users = out[key(api::fields::UserList::users)];
  if (print_json_if_asked(output, users)) return 0;
  std::vector<std::vector<std::string>> rows = {{"NAME", "ADMIN"}};
  for (const auto& u : users)
    rows.push_back({u[key(api::fields::User::name)], u[key(api::fields::User::admin)].get<bool>() ? "yes" : "no"});
  print_table(rows);
  return 0;
}

int delete_user(const std::string& name) {
  Client client(load_endpoint());
  if (auto f = client.call("DELETE", "/users/" + name, nullptr, nullptr)) return fail(*f);
  printf("user %s deleted; their tokens no longer work\n", name.c_str());
  return 0;
}

void add_user_group(CLI::App& app, Action* action) {
  auto* user = app.add_subcommand("user", "users (admin)");
  user->require_subcommand(1);
  auto name = std::make_shared<std::string>();
  auto* create = user->add_subcommand("create", "create a user; prints their token");
  create->add_option("name", *name)->required();
  create->callback([name, action] { *action = [name] { return create_user(*name); }; });
  auto output = std::make_shared<std::string>();
  auto* list = user->add_subcommand("list", "list users");
  add_output_option(list, output.get());
  list->callback([output, action] { *action = [output] { return list_users(*output); }; });
  auto* remove = user->add_subcommand("delete", "delete a user who owns no cluster or volume; their tokens stop working");
  remove->add_option("name", *name)->required();
  remove->callback([name, action] { *action = [name] { return delete_user(*name); }; });
}

void add_token_group(CLI::App& app, Action* action) {
  auto* token = app.add_subcommand("token", "API tokens: yours, or with --user anyone's (admin)");
  token->require_subcommand(1);
  auto o = std::make_shared<TokenOptions>();
  auto* create = token->add_subcommand("create", "make a token; prints it (edtd keeps only its hash)");
  create->add_option("--expires-in", o->expires_in, "how long it works, e.g. 90d, 12h (default: never expires)");
  create->add_option("--description", o->description, "what it is for, e.g. 'ci runner'");
  auto* list = token->add_subcommand("list", "list tokens (never the tokens themselves)");
  add_output_option(list, &o->output);
  auto* revoke = token->add_subcommand("revoke", "revoke a token by its id (from edt token list); it stops working at once");
  revoke->add_option("id", o->id)->required()->check(CLI::PositiveNumber);
  for (auto* cmd : {create, list, revoke}) cmd->add_option("--user", o->user, "whose tokens (default: yours)");
  create->callback([o, action] { *action = [o] { return create_token(*o); }; });
  list->callback([o, action] { *action = [o] { return list_tokens(*o); }; });
  revoke->callback([o, action] { *action = [o] { return revoke_token(*o); }; });
}

}  // namespace

void add_user_commands(CLI::App& app, Action* action) {
  add_user_group(app, action);
  add_token_group(app, action);
}

}  // namespace edt::cli
