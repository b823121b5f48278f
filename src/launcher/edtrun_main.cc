// edtrun: starts one worker per slot on the hosts of a host list, with
// horovodrun's flags. See docs/launcher.md.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/units.h"
#include "launcher/driver.h"
#include "launcher/elastic_flags.h"

namespace edt::launcher {
namespace {

constexpr int kUsageError = 2;

// CLI11 has no multi-letter single-dash options; horovodrun's -np and
// -hostfile are renamed to their long forms before parsing. Only the
// options part is parsed, and the command is taken from the original argv,
// so a "-np" among the command's own arguments is left as it was.
std::vector<std::string> long_option_spellings(const std::vector<std::string>& args) {
  std::vector<std::string> renamed;
  for (const auto& arg : args) {
    if (arg == "--") break;
    if (arg == "-np" || arg.rfind("-np=", 0) == 0) {
      renamed.push_back("--num-proc" + arg.substr(3));
    } else if (arg == "-hostfile" || arg.rfind("-hostfile=", 0) == 0) {
      renamed.push_back("-" + arg);
    } else {
      renamed.push_back(arg);
    }
  }
  for (size_t i = renamed.size(); i < args.size(); ++i) renamed.push_back(args[i]);
  return renamed;
}

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "edtrun: %s\n", message.c_str());
  return code;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  CLI::App app{"edtrun: run a command once per slot on the hosts of a host list (horovodrun-compatible)", "edtrun"};
  app.prefix_command();
  int np = 0;
  std::string host_list, hostfile, identity_file, output_dir, start_timeout = "30s";
  int ssh_port = 0;
  bool verbose = false;
  std::vector<std::string> exports, ssh_options;
  app.add_option("--num-proc,-n", np, "Number of workers (also -np)")->required();
  app.add_option("-H,--hosts", host_list, "Hosts and slots: host1:N,host2:M (a bare host has 1 slot)");
  app.add_option("--hostfile", hostfile, "Hostfile: lines 'host slots=N', 'host:N' or 'host' (also -hostfile)");
  app.add_option("-p,--ssh-port", ssh_port, "SSH port of the remote hosts")->check(CLI::Range(1, 65535));
  app.add_option("-i,--ssh-identity-file", identity_file, "SSH private key for the remote hosts");
  app.add_option("--ssh-option", ssh_options, "Extra ssh option NAME=VALUE (as ssh -o), repeatable")
      ->allow_extra_args(false);
  app.add_option("--start-timeout", start_timeout,
                 "How long remote hosts may take to start their workers: seconds, or a duration like 90s, 2m");
  app.add_option("--output-filename", output_dir, "Write each worker's output to DIR/rank.N/stdout and stderr");
  app.add_flag("--verbose", verbose, "Say what edtrun does: addresses, commands, exits");
  app.add_option("-x", exports, "Pass VAR=VALUE (or VAR, with edtrun's value) to every worker, repeatable")
      ->allow_extra_args(false);
  ElasticFlags elastic;
  add_elastic_flags(app, elastic);
  try {
    std::vector<std::string> reversed = long_option_spellings(args);
    std::reverse(reversed.begin(), reversed.end());  // CLI11 takes a vector last argument first
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // The command is the tail of the original arguments.
  std::vector<std::string> remaining = app.remaining();
  std::vector<std::string> command(args.end() - static_cast<long>(remaining.size()), args.end());
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  if (command.empty()) {
    return fail("no command given; put the program to run after the options, e.g. edtrun -np 2 python3 train.py", kUsageError);
  }

  DriverOptions options;
  options.np = np;
  options.command = command;
  options.verbose = verbose;
  options.output_dir = output_dir;
  options.launcher_env = current_environment();
  options.cwd = std::filesystem::current_path().string();
  if (!host_list.empty() && !hostfile.empty()) {
    return fail("-H and --hostfile both given; give one of them", kUsageError);
  }
  if (!hostfile.empty()) {
    auto hosts = read_hostfile(hostfile);
    if (!hosts.is_ok()) return fail(hosts.status().message(), kUsageError);
    options.hosts = hosts.value();
    options.hosts_source = "--hostfile " + hostfile;
  } else if (!host_list.empty()) {
    auto hosts = parse_host_list(host_list);
    if (!hosts.is_ok()) return fail(hosts.status().message(), kUsageError);
    options.hosts = hosts.value();
    options.hosts_source = "-H";
  } else {
    options.hosts = {HostSlots{"localhost", std::max(np, 1)}};
  }
  auto timeout = parse_duration(start_timeout);
  if (!timeout.is_ok() || timeout.value().count() <= 0) {
    return fail("--start-timeout " + start_timeout + " is not a positive duration; give seconds, e.g. --start-timeout 60",
                kUsageError);
  }
  options.start_timeout = timeout.value();
  options.ssh.port = ssh_port;
  options.ssh.identity_file = identity_file;
  options.ssh.options = ssh_options;
  options.ssh.connect_timeout = std::chrono::ceil<std::chrono::seconds>(options.start_timeout);
  auto parsed_exports = parse_exports(exports, options.launcher_env);
  if (!parsed_exports.is_ok()) return fail(parsed_exports.status().message(), kUsageError);
  options.exports = parsed_exports.value();

  if (elastic.enabled()) return run_elastic(std::move(options), hostfile, elastic);
  Driver driver(std::move(options));
  auto code = driver.run();
  if (!code.is_ok()) {
    int exit_code = code.status().code() == StatusCode::kInvalidArgument || code.status().code() == StatusCode::kNotFound ? kUsageError : 1;
    return fail(code.status().message(), exit_code);
  }
  return code.value();
}

}  // namespace
}  // namespace edt::launcher

int main(int argc, char** argv) { return edt::launcher::run(argc, argv); }
