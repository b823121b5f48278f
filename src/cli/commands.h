// The edt CLI's subcommands, one group a file: each add_*_commands()
// registers its group's subcommands on the app, each with options of its
// own, and when one is parsed sets `*action` to the function that runs it.
// Request bodies use the field names, and flags the limits and choices, of
// the API contract (edt_api/contract.h, generated from api/openapi.json).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cli/client.h"

namespace edt::cli {

// What main() runs after parsing: the parsed subcommand; returns the exit code.
using Action = std::function<int()>;

void add_login_command(CLI::App& app, Action* action);
void add_cluster_commands(CLI::App& app, Action* action);
void add_exec_commands(CLI::App& app, Action* action);
void add_resource_commands(CLI::App& app, Action* action);
void add_user_commands(CLI::App& app, Action* action);
// After add_user_commands: it adds `edt user team` to the user group.
void add_team_commands(CLI::App& app, Action* action);

// Helpers the groups share.

// Logs edtd's refusal (or that it cannot be reached); returns exit code 1.
int fail(const ApiFailure& failure);
// Logs a mistake in the command line and its fix; returns exit code 2.
int usage_error(const std::string& message, const std::string& fix);
// Adds -o/--output (json or table) storing into `output`.
void add_output_option(CLI::App* command, std::string* output);
// Prints rows as columns, the first row as the header.
void print_table(const std::vector<std::vector<std::string>>& rows);
// Prints `list` as JSON when output is "json"; returns whether it did.
bool print_json_if_asked(const std::string& output, const nlohmann::json& list);
// A field of an API object as a JSON key (fields come from the contract).
inline std::string key(std::string_view field) { return std::string(field); }
// `text` %-encoded for a URL's query value: all but letters, digits and -._~/.
std::string query_value(std::string_view text);
// "a, b or c".
std::string join_choices(const std::vector<std::string>& items);

}  // namespace edt::cli
