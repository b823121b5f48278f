#include "launcher/horovod_flags.h"

#include <stdio.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <vector>

#include "common/log.h"

namespace edt::launcher {
namespace {

// Why a flag does nothing on edt, in the words of its note.
constexpr char kNetwork[] = "edt's workers connect over the address that routes to each peer";
constexpr char kController[] = "edt has a controller of its own (its TCP store and communicator), neither Gloo nor MPI";
constexpr char kAlgorithm[] = "edt's communicator chooses its algorithms from the hosts' layout itself";
constexpr char kAutotune[] = "edt has no autotuner; set --fusion-threshold-mb and --cycle-time-ms";
constexpr char kTimeline[] = "edt writes no Horovod timeline";
constexpr char kMpi[] = "edt does not run MPI";
constexpr char kNccl[] = "edt does not use NCCL";
constexpr char kGloo[] = "edt does not use Gloo; EDT_TIMEOUT is how long a collective waits";
constexpr char kShutdown[] = "edt's engine does not stop a stalled job; a collective fails after EDT_TIMEOUT";
constexpr char kTimestamp[] = "edtrun's own messages carry no timestamps";

// One horovodrun flag. `config` is its key in the YAML config file
// ("section.key"); a switch is set by the config when the key's value is
// `when` (true/false). `env`: the workers' variable it sets (mapped);
// otherwise `why` it is ignored, or neither: it asks for what edt does anyway.
struct Knob {
  const char* flag;
  bool takes_value;
  const char* config;
  const char* when;
  const char* env;
  const char* why;
};

constexpr Knob kKnobs[] = {
    {"--fusion-threshold-mb", true, "params.fusion_threshold_mb", nullptr, "HOROVOD_FUSION_THRESHOLD", nullptr},
    {"--cycle-time-ms", true, "params.cycle_time_ms", nullptr, "HOROVOD_CYCLE_TIME", nullptr},
    {"--cache-capacity", true, "params.cache_capacity", nullptr, "HOROVOD_CACHE_CAPACITY", nullptr},
    // Before the warning time: --no-stall-check wins (the first mapped value does).
    {"--no-stall-check", false, "stall_check.enabled", "false", "HOROVOD_STALL_CHECK_TIME_SECONDS", nullptr},
    {"--stall-check-warning-time-seconds", true, "stall_check.warning_time_seconds", nullptr,
     "HOROVOD_STALL_CHECK_TIME_SECONDS", nullptr},
    {"--stall-check", false, "stall_check.enabled", "true", nullptr, nullptr},
    {"--stall-check-shutdown-time-seconds", true, "stall_check.shutdown_time_seconds", nullptr, nullptr, kShutdown},
    {"--network-interfaces", true, nullptr, nullptr, nullptr, kNetwork},
    {"--network-interface", true, nullptr, nullptr, nullptr, kNetwork},
    {"--gloo", false, "controller", "gloo", nullptr, kController},
    {"--mpi", false, "controller", "mpi", nullptr, kController},
    {"--jsrun", false, nullptr, nullptr, nullptr, "edtrun starts workers over ssh (or srun), not jsrun"},
    {"--tcp", false, nullptr, nullptr, nullptr, "edt's transport chooses TCP or shared memory per peer itself"},
    {"--disable-cache", false, nullptr, nullptr, nullptr, "edtrun keeps no cache of host checks"},
    {"--hierarchical-allreduce", false, "params.hierarchical_allreduce", "true", nullptr, kAlgorithm},
    {"--no-hierarchical-allreduce", false, "params.hierarchical_allreduce", "false", nullptr, nullptr},
    {"--hierarchical-allgather", false, "params.hierarchical_allgather", "true", nullptr, kAlgorithm},
    {"--no-hierarchical-allgather", false, "params.hierarchical_allgather", "false", nullptr, nullptr},
    {"--torus-allreduce", false, "params.torus_allreduce", "true", nullptr, kAlgorithm},
    {"--no-torus-allreduce", false, "params.torus_allreduce", "false", nullptr, nullptr},
    {"--autotune", false, "autotune.enabled", "true", nullptr, kAutotune},
    {"--no-autotune", false, "autotune.enabled", "false", nullptr, nullptr},
    {"--autotune-log-file", true, "autotune.log_file", nullptr, nullptr, kAutotune},
    {"--autotune-warmup-samples", true, "autotune.warmup_samples", nullptr, nullptr, kAutotune},
    {"--autotune-steps-per-sample", true, "autotune.steps_per_sample", nullptr, nullptr, kAutotune},
    {"--autotune-bayes-opt-max-samples", true, "autotune.bayes_opt_max_samples", nullptr, nullptr, kAutotune},
    {"--autotune-gaussian-process-noise", true, "autotune.gaussian_process_noise", nullptr, nullptr, kAutotune},
    {"--timeline-filename", true, "timeline.filename", nullptr, nullptr, kTimeline},
    {"--timeline-mark-cycles", false, "timeline.mark_cycles", "true", nullptr, kTimeline},
    {"--no-timeline-mark-cycles", false, "timeline.mark_cycles", "false", nullptr, nullptr},
    {"--mpi-threads-disable", false, "library_options.mpi_threads_disable", "true", nullptr, kMpi},
    {"--no-mpi-threads-disable", false, "library_options.mpi_threads_disable", "false", nullptr, nullptr},
    {"--mpi-args", true, nullptr, nullptr, nullptr, kMpi},
    {"--binding-args", true, nullptr, nullptr, nullptr, kMpi},
    {"--num-nccl-streams", true, "library_options.num_nccl_streams", nullptr, nullptr, kNccl},
    {"--thread-affinity", true, "library_options.thread_affinity", nullptr, nullptr,
     "edt's engine thread runs where the worker's other threads may"},
    {"--gloo-timeout-seconds", true, "library_options.gloo_timeout_seconds", nullptr, nullptr, kGloo},
    {"--log-with-timestamp", false, "logging.with_timestamp", "true", nullptr, kTimestamp},
    {"--log-without-timestamp", false, "logging.with_timestamp", "false", nullptr, nullptr},
    {"--log-hide-timestamp", false, nullptr, nullptr, nullptr, nullptr},
    {"--no-log-hide-timestamp", false, nullptr, nullptr, nullptr, kTimestamp},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") + 1 - begin);
}

std::string unquote(std::string v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) return v.substr(1, v.size() - 2);
  return v;
}

// The subset of YAML Horovod's config files use: top-level sections of
// "key: value" lines, and top-level "key: value" (controller). Keys come
// out as "section.key".
Result<std::map<std::string, std::string>> read_yaml(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalid_argument("--config-file " + path + ": cannot read it (give a readable YAML file)");
  std::map<std::string, std::string> entries;
  std::string line, section;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    const std::string text = trim(line);
    if (text.empty() || text == "---") continue;
    const auto colon = text.find(':');
    if (colon == std::string::npos || colon == 0)
      return invalid_argument("--config-file " + path + " line " + std::to_string(number) + ": '" + text +
                              "' is not 'key: value' (Horovod's config file: sections of 'key: value' lines)");
    const std::string key = trim(text.substr(0, colon)), value = unquote(trim(text.substr(colon + 1)));
    const bool indented = line.find_first_not_of(" \t") > 0;
    if (!indented) section = value.empty() ? key : "";
    if (!value.empty()) entries[indented && !section.empty() ? section + "." + key : key] = value;
  }
  return entries;
}

bool is_number(const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  return !v.empty() && end && *end == '\0' && d >= 0;
}

// The value a mapped flag gives its variable: --fusion-threshold-mb is in
// MB, the variable in bytes (as horovodrun converts it).
Result<std::string> mapped_value(const Knob& knob, const std::string& value) {
  if (!knob.takes_value) return std::string("0");  // --no-stall-check: no warning
  if (!is_number(value))
    return invalid_argument(std::string(knob.flag) + " " + value + ": not a number >= 0");
  if (std::string(knob.flag) != "--fusion-threshold-mb") return value;
  return std::to_string(static_cast<int64_t>(std::strtod(value.c_str(), nullptr) * 1024 * 1024));
}

}  // namespace

void add_horovod_flags(CLI::App& app, HorovodFlags& flags) {
  for (const Knob& knob : kKnobs) {
    const std::string flag = knob.flag;
    const std::string help = knob.env ? std::string("horovodrun's; sets ") + knob.env + " for the workers"
                             : knob.why ? std::string("horovodrun's; ignored: ") + knob.why
                                        : std::string("horovodrun's; what edt does anyway");
    if (knob.takes_value) {
      app.add_option_function<std::string>(flag, [&flags, flag](const std::string& v) { flags.given[flag] = v; }, help)
          ->allow_extra_args(false);
    } else {
      app.add_flag_callback(flag, [&flags, flag] { flags.given[flag] = ""; }, help);
    }
  }
  app.add_option("--config-file", flags.config_file, "horovodrun's YAML config file; the command line wins over it");
  app.add_flag("-v,--version", flags.version, "Print the version and exit");
  app.add_flag("--check-build", flags.check_build, "Print what edt provides, in horovodrun's -cb table, and exit (also -cb)");
}

Status read_config_file(HorovodFlags& flags, std::string& log_level) {
  if (flags.config_file.empty()) return Status::ok();
  EDT_ASSIGN_OR_RETURN(auto entries, read_yaml(flags.config_file));
  for (const Knob& knob : kKnobs) {
    if (!knob.config || flags.given.count(knob.flag)) continue;
    auto it = entries.find(knob.config);
    if (it == entries.end()) continue;
    if (knob.takes_value) {
      flags.given[knob.flag] = it->second;
    } else if (lower(it->second) == knob.when) {
      flags.given[knob.flag] = "";
    }
  }
  if (log_level.empty() && entries.count("logging.level")) log_level = entries["logging.level"];
  return Status::ok();
}

Status apply_horovod_flags(const HorovodFlags& flags, Environment& exports) {
  for (const Knob& knob : kKnobs) {
    auto given = flags.given.find(knob.flag);
    if (given == flags.given.end()) continue;
    if (knob.env) {
      EDT_ASSIGN_OR_RETURN(std::string value, mapped_value(knob, given->second));
      exports.emplace(knob.env, value);  // an explicit -x wins
    } else if (knob.why) {
      log::warn("{} is ignored: {}", knob.flag, knob.why);
    }
  }
  return Status::ok();
}

std::string check_build_text(bool verbose) {
  // The frameworks whose Horovod API edt serves: the framework and edt's
  // module for it both importable by this machine's python3.
  std::map<std::string, bool> found;
  const char* probe =
      "python3 -c \"import importlib.util as u\nfor m in ('tensorflow', 'torch'):\n"
      "    try: print(m, bool(u.find_spec(m) and u.find_spec('edt.' + m)))\n"
      "    except Exception: print(m, False)\" 2>/dev/null";
  if (FILE* p = popen(probe, "r")) {
    char name[64], value[16];
    while (fscanf(p, "%63s %15s", name, value) == 2) found[name] = std::string(value) == "True";
    pclose(p);
  }
  auto mark = [](bool on) { return on ? "[X]" : "[ ]"; };
  return fmt::format(
      "{}Horovod v{} (edt {}):\n\n"
      "Available Frameworks:\n    {} TensorFlow\n    {} PyTorch\n    [ ] MXNet\n\n"
      "Available Controllers:\n    [ ] MPI\n    [ ] Gloo\n    [X] edt (TCP store rendezvous, elastic membership)\n\n"
      "Available Tensor Operations:\n    [ ] NCCL\n    [ ] DDL\n    [ ] CCL\n    [ ] MPI\n    [ ] Gloo\n"
      "    [X] edt (CPU tensors over TCP and shared memory)\n",
      verbose ? "\n" : "", EDT_HOROVOD_VERSION, EDT_VERSION, mark(found["tensorflow"]), mark(found["torch"]));
}

std::string version_text(bool horovod) {
  return horovod ? fmt::format("{} (edt {})\n", EDT_HOROVOD_VERSION, EDT_VERSION) : fmt::format("edt {}\n", EDT_VERSION);
}

}  // namespace edt::launcher
