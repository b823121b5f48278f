// edtrun: starts one worker per slot on the hosts of a host list, with
// horovodrun's flags. See docs/launcher.md.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/units.h"
#include "launcher/elastic_flags.h"
#include "launcher/slurm_allocation.h"
#include "launcher/static_driver.h"

namespace edt::launcher {
namespace {

constexpr int kUsageError = 2;

// What the command line says, before it is checked.
struct Flags {
  std::optional<int> np;  // -np; unset: one per host with --per-host, else an error
  std::string host_list, hostfile, identity_file, output_dir, start_timeout = "30s", log_level;
  int ssh_port = 0;
  bool verbose = false;
  bool per_host = false;
  std::vector<std::string> exports, ssh_options;
  ElasticFlags elastic;
  std::vector<std::string> command;
};

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
  log::error("{}", message);
  return code;
}

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("--num-proc,-n", f.np, "Number of workers (also -np); with --per-host, default: one per host");
  app.add_flag("--per-host", f.per_host,
               "One worker per host, told NNODES (and NUM_NODES), NODE_RANK and GPUS_PER_NODE (the host's slots): for a launcher "
               "such as torchrun that starts the host's processes itself");
  app.add_option("-H,--hosts", f.host_list, "Hosts and slots: host1:N,host2:M (a bare host has 1 slot)");
  app.add_option("--hostfile", f.hostfile, "Hostfile: lines 'host slots=N', 'host:N' or 'host' (also -hostfile)");
  app.add_option("-p,--ssh-port", f.ssh_port, "SSH port of the remote hosts")->check(CLI::Range(1, 65535));
  app.add_option("-i,--ssh-identity-file", f.identity_file, "SSH private key for the remote hosts");
  app.add_option("--ssh-option", f.ssh_options, "Extra ssh option NAME=VALUE (as ssh -o), repeatable")
      ->allow_extra_args(false);
  app.add_option("--start-timeout", f.start_timeout,
                 "How long remote hosts may take to start their workers: seconds, or a duration like 90s, 2m");
  app.add_option("--output-filename", f.output_dir, "Write each worker's output to DIR/rank.N/stdout and stderr");
  app.add_flag("--verbose", f.verbose, "Say what edtrun does: addresses, commands, exits (--log-level debug)");
  app.add_option("--log-level", f.log_level,
                 "edtrun's own messages: TRACE, DEBUG, INFO, WARNING, ERROR or FATAL (default: EDT_LOG_LEVEL, or INFO)");
  app.add_option("-x", f.exports, "Pass VAR=VALUE (or VAR, with edtrun's value) to every worker, repeatable")
      ->allow_extra_args(false);
  add_elastic_flags(app, f.elastic);
}

// --log-level as horovodrun spells it (any case; FATAL is error), else --verbose.
Result<std::optional<log::Level>> log_level_of(const Flags& f) {
  if (f.log_level.empty()) return f.verbose ? std::optional(log::Level::kDebug) : std::nullopt;
  std::string name = f.log_level;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  auto level = log::parse_level(name == "fatal" ? "error" : name);
  if (!level.is_ok()) return invalid_argument("--log-level " + f.log_level + ": " + level.status().message());
  return std::optional(*level);
}

// The hosts of -H, --hostfile or the default localhost:np, into `options`.
Status read_hosts(const Flags& f, JobOptions& options) {
  if (!f.host_list.empty() && !f.hostfile.empty()) return invalid_argument("-H and --hostfile both given; give one of them");
  if (!f.hostfile.empty()) {
    EDT_ASSIGN_OR_RETURN(options.hosts, read_hostfile(f.hostfile));
    options.hosts_source = "--hostfile " + f.hostfile;
  } else if (!f.host_list.empty()) {
    EDT_ASSIGN_OR_RETURN(options.hosts, parse_host_list(f.host_list));
    options.hosts_source = "-H";
  } else if (in_slurm_allocation(options.launcher_env)) {
    // Inside salloc or sbatch: the allocation's nodes, its tasks as slots.
    EDT_ASSIGN_OR_RETURN(options.hosts, slurm_allocation_hosts(options.launcher_env));
    options.hosts_source = "the Slurm allocation (SLURM_JOB_NODELIST " +
                           options.launcher_env.at("SLURM_JOB_NODELIST") + ")";
  } else {
    options.hosts = {HostSlots{"localhost", std::max(f.np.value_or(1), 1)}};
  }
  return Status::ok();
}

// The checked options of every job; an error is a usage error.
Result<JobOptions> job_options(const Flags& f) {
  JobOptions options;
  options.np = f.np.value_or(0);
  options.command = f.command;
  options.output_dir = f.output_dir;
  options.launcher_env = current_environment();
  options.cwd = std::filesystem::current_path().string();
  EDT_RETURN_IF_ERROR(read_hosts(f, options));
  if (f.per_host) {
    for (auto& host : options.hosts) {
      options.node_slots.push_back(host.slots);
      host.slots = 1;
    }
    if (!f.np) options.np = static_cast<int>(options.hosts.size());
  } else if (!f.np) {
    return invalid_argument("-np is missing; give the number of workers, e.g. -np 2 (or --per-host for one per host)");
  }
  auto timeout = parse_duration(f.start_timeout);
  if (!timeout.is_ok() || timeout.value().count() <= 0) {
    return invalid_argument("--start-timeout " + f.start_timeout +
                            " is not a positive duration; give seconds, e.g. --start-timeout 60");
  }
  options.start_timeout = timeout.value();
  options.ssh.port = f.ssh_port;
  options.ssh.identity_file = f.identity_file;
  options.ssh.options = f.ssh_options;
  options.ssh.connect_timeout = std::chrono::ceil<std::chrono::seconds>(options.start_timeout);
  EDT_ASSIGN_OR_RETURN(options.exports, parse_exports(f.exports, options.launcher_env));
  return options;
}

int run_static(JobOptions options) {
  StaticDriver driver(std::move(options));
  auto code = driver.run();
  if (!code.is_ok()) {
    int exit_code = code.status().code() == StatusCode::kInvalidArgument || code.status().code() == StatusCode::kNotFound ? kUsageError : 1;
    return fail(code.status().message(), exit_code);
  }
  return code.value();
}

int run(int argc, char** argv) {
  log::init("edtrun");
  std::vector<std::string> args(argv + 1, argv + argc);
  CLI::App app{"edtrun: run a command once per slot on the hosts of a host list (horovodrun-compatible)", "edtrun"};
  app.prefix_command();
  Flags flags;
  add_flags(app, flags);
  try {
    std::vector<std::string> reversed = long_option_spellings(args);
    std::reverse(reversed.begin(), reversed.end());  // CLI11 takes a vector last argument first
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help); a bad argument is exit 2,
    // whatever CLI11's own code for it.
    return app.exit(e) == 0 ? 0 : kUsageError;
  }
  auto level = log_level_of(flags);
  if (!level.is_ok()) return fail(level.status().message(), kUsageError);
  if (*level) log::set_level(**level);
  // The command is the tail of the original arguments.
  std::vector<std::string> remaining = app.remaining();
  flags.command.assign(args.end() - static_cast<long>(remaining.size()), args.end());
  if (!flags.command.empty() && flags.command.front() == "--") {
    flags.command.erase(flags.command.begin());
  } else if (!flags.command.empty() && flags.command.front().rfind("--", 0) == 0) {
    // No program is named --something: an option edtrun does not know.
    return fail("unknown option " + flags.command.front() + "; see edtrun --help (a command that starts with " +
                    "dashes goes after --)", kUsageError);
  }
  if (flags.command.empty()) {
    return fail("no command given; put the program to run after the options, e.g. edtrun -np 2 python3 train.py", kUsageError);
  }
  auto options = job_options(flags);
  if (!options.is_ok()) return fail(options.status().message(), kUsageError);
  if (flags.elastic.enabled() && flags.per_host)
    return fail("--per-host is for a fixed set of hosts; it cannot be elastic (drop --min-np/--max-np or --per-host)",
                kUsageError);
  if (flags.elastic.enabled()) return run_elastic(std::move(options).value(), flags.hostfile, flags.elastic);
  return run_static(std::move(options).value());
}

}  // namespace
}  // namespace edt::launcher

int main(int argc, char** argv) { return edt::launcher::run(argc, argv); }
