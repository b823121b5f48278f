// edtrun: starts one worker per slot on the hosts of a host list, with
// horovodrun's flags. See docs/launcher.md.
//
// Run as `horovodrun` (a symlink to edtrun), it is the same launcher under
// Horovod's name and exit codes: 0, 2 for a usage error, 1 for any failure
// (horovodrun raises then). Where another horovodrun (a real Horovod's) is
// on PATH, that one runs instead: ours never shadows a real Horovod.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/units.h"
#include "launcher/elastic_flags.h"
#include "launcher/horovod_flags.h"
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
  bool prefix_timestamp = false;
  std::vector<std::string> exports, ssh_options;
  ElasticFlags elastic;
  HorovodFlags horovod;
  std::vector<std::string> command;
};

// CLI11 has no multi-letter single-dash options; horovodrun's -np,
// -hostfile, -cb and -prefix-timestamp are renamed to their long forms
// before parsing (else -prefix-timestamp would be -p refix-timestamp). Only the
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
    } else if (arg == "-cb") {
      renamed.push_back("--check-build");
    } else if (arg == "-prefix-timestamp") {
      renamed.push_back("--prefix-output-with-timestamp");
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
  app.add_flag("--prefix-output-with-timestamp", f.prefix_timestamp,
               "Start every output line with the time, as horovodrun does (also -prefix-timestamp)");
  add_elastic_flags(app, f.elastic);
  add_horovod_flags(app, f.horovod);
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

// The directory of --per-host's torchrun check (per_host_torchrun.sh):
// beside edtrun in the build tree, in libexec/edt/per-host where installed.
// "" if neither is there.
std::string per_host_tools_dir() {
  std::error_code ec;
  const auto bin = std::filesystem::canonical("/proc/self/exe", ec).parent_path();
  if (ec) return "";
  for (const auto& dir : {bin / "per-host", bin / EDT_BIN_TO_PER_HOST}) {
    if (access((dir / "torchrun").c_str(), X_OK) == 0) return dir.lexically_normal().string();
  }
  return "";
}

// --per-host: one worker per host, each host's slots kept as its
// GPUS_PER_NODE, and the torchrun check first on the workers' PATH.
void set_per_host(JobOptions& options) {
  for (auto& host : options.hosts) {
    options.node_slots.push_back(host.slots);
    host.slots = 1;
  }
  if (const std::string dir = per_host_tools_dir(); !dir.empty()) {
    auto& path = options.launcher_env["PATH"];
    path = path.empty() ? dir : dir + ":" + path;
  }
}

// The checked options of every job; an error is a usage error.
Result<JobOptions> job_options(const Flags& f) {
  JobOptions options;
  options.np = f.np.value_or(0);
  options.command = f.command;
  options.output_dir = f.output_dir;
  options.prefix_timestamp = f.prefix_timestamp;
  options.launcher_env = current_environment();
  options.cwd = std::filesystem::current_path().string();
  EDT_RETURN_IF_ERROR(read_hosts(f, options));
  if (f.per_host) {
    set_per_host(options);
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
  EDT_RETURN_IF_ERROR(apply_horovod_flags(f.horovod, options.exports));
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

// Another horovodrun on PATH than this program (a real Horovod's), or "".
std::string real_horovodrun() {
  std::error_code ec;
  const auto self = std::filesystem::canonical("/proc/self/exe", ec);
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / "horovodrun";
    if (access(candidate.c_str(), X_OK) != 0) continue;
    const auto target = std::filesystem::canonical(candidate, ec);
    // Ours: a link to this edtrun or to another edtrun (the installed one).
    if (ec || target == self || target.filename() == "edtrun") continue;
    return candidate.string();
  }
  return "";
}

// -v and -cb: they need no -np and no command, as in horovodrun.
std::optional<int> answer_at_once(const Flags& flags, bool horovod) {
  if (flags.horovod.version) {
    std::cout << version_text(horovod);
    return 0;
  }
  if (flags.horovod.check_build) {
    std::cout << check_build_text(flags.verbose);
    return 0;
  }
  return std::nullopt;
}

// The command is the tail of the original arguments; "" or a usage message.
std::string take_command(const CLI::App& app, const std::vector<std::string>& args, Flags& flags) {
  std::vector<std::string> remaining = app.remaining();
  flags.command.assign(args.end() - static_cast<long>(remaining.size()), args.end());
  if (!flags.command.empty() && flags.command.front() == "--") {
    flags.command.erase(flags.command.begin());
  } else if (!flags.command.empty() && flags.command.front().rfind("--", 0) == 0) {
    // No program is named --something: an option edtrun does not know.
    return "unknown option " + flags.command.front() + "; see edtrun --help (a command that starts with " +
           "dashes goes after --)";
  }
  if (flags.command.empty()) return "no command given; put the program to run after the options, e.g. edtrun -np 2 python3 train.py";
  return "";
}

int launch(int argc, char** argv, bool horovod) {
  std::vector<std::string> args(argv + 1, argv + argc);
  CLI::App app{"edtrun: run a command once per slot on the hosts of a host list (horovodrun-compatible)",
               horovod ? "horovodrun" : "edtrun"};
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
  if (auto answered = answer_at_once(flags, horovod)) return *answered;
  Status config = read_config_file(flags.horovod, flags.log_level);
  if (!config.is_ok()) return fail(config.message(), kUsageError);
  auto level = log_level_of(flags);
  if (!level.is_ok()) return fail(level.status().message(), kUsageError);
  if (*level) log::set_level(**level);
  if (auto bad = take_command(app, args, flags); !bad.empty()) return fail(bad, kUsageError);
  auto options = job_options(flags);
  if (!options.is_ok()) return fail(options.status().message(), kUsageError);
  if (flags.elastic.enabled() && flags.per_host)
    return fail("--per-host is for a fixed set of hosts; it cannot be elastic (drop --min-np/--max-np or --per-host)",
                kUsageError);
  if (flags.elastic.enabled()) return run_elastic(std::move(options).value(), flags.hostfile, flags.elastic);
  return run_static(std::move(options).value());
}

int run(int argc, char** argv) {
  const bool horovod = std::filesystem::path(argv[0]).filename() == "horovodrun";
  log::init(horovod ? "horovodrun" : "edtrun");
  if (horovod) {
    if (const std::string real = real_horovodrun(); !real.empty()) {
      execv(real.c_str(), argv);
      return fail("cannot run " + real + " (Horovod's horovodrun, found on PATH): " + std::strerror(errno), 1);
    }
  }
  const int code = launch(argc, argv, horovod);
  // horovodrun's exit codes: a failed job raises there, which exits 1.
  return horovod && code != 0 && code != kUsageError ? 1 : code;
}

}  // namespace
}  // namespace edt::launcher

int main(int argc, char** argv) { return edt::launcher::run(argc, argv); }
