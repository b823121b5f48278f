// edt: the command line client of edtd. Tables for people, -o json for
// scripts; refusals print what was wrong, where and what to do, and exit 1.
// Each group of subcommands lives in its own file (commands.h).
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "cli/commands.h"
#include "common/log.h"
#include "edt_api/contract.h"

namespace edt::cli {
namespace {

using nlohmann::json;

struct LoginOptions {
  std::string api = "http://127.0.0.1:7470", token;
};

int login(const LoginOptions& o) {
  std::filesystem::create_directories(std::filesystem::path(config_path()).parent_path());
  {
    std::ofstream out(config_path(), std::ios::trunc);
    out << json{{"api", o.api}, {"token", o.token}}.dump(2) << "\n";
  }
  chmod(config_path().c_str(), 0600);
  Client client({o.api, o.token});
  json me;
  if (auto f = client.call("GET", "/whoami", nullptr, &me)) return fail(*f);
  printf("logged in to %s as %s\n", o.api.c_str(), me[key(api::fields::User::name)].get<std::string>().c_str());
  return 0;
}

std::string check_log_level(const std::string& name) {
  auto level = log::parse_level(name);
  return level.is_ok() ? "" : level.status().message();
}

}  // namespace

void add_login_command(CLI::App& app, Action* action) {
  auto o = std::make_shared<LoginOptions>();
  auto* cmd = app.add_subcommand("login", "save the API address and token in " + config_path());
  cmd->add_option("--api", o->api, "edtd's address")->capture_default_str();
  cmd->add_option("--token", o->token, "your token")->required();
  cmd->callback([o, action] { *action = [o] { return login(*o); }; });
}

int main(int argc, char** argv) {
  log::init("edt");
  CLI::App app{"edt: distributed-training clusters (talks to edtd; EDT_API and EDT_TOKEN say where and who)"};
  app.require_subcommand(1);
  app.fallthrough();  // --log-level may come after the subcommand too
  std::string log_level;
  app.add_option("--log-level", log_level, "trace, debug, info, warning, error or off (default: EDT_LOG_LEVEL, else info)")
      ->check(check_log_level);
  Action action;
  add_login_command(app, &action);
  add_cluster_commands(app, &action);
  add_exec_commands(app, &action);
  add_resource_commands(app, &action);
  add_user_commands(app, &action);
  add_team_commands(app, &action);
  CLI11_PARSE(app, argc, argv);
  if (!log_level.empty()) log::set_level(log::parse_level(log_level).value());
  return action ? action() : 0;
}

}  // namespace edt::cli

int main(int argc, char** argv) { return edt::cli::main(argc, argv); }
