#include "launcher/elastic_flags.h"

#include <optional>

#include "common/log.h"
#include "common/units.h"
#include "launcher/elastic_driver.h"

namespace edt::launcher {
namespace {

constexpr int kUsageError = 2;

int usage_error(const std::string& message) {
  log::error("{}", message);
  return kUsageError;
}

// The durations of `flags`, checked, into `options`; a usage message if one is not positive.
std::optional<std::string> parse_durations(const ElasticFlags& flags, ElasticDriverOptions& options,
                                           std::chrono::milliseconds& discovery_interval) {
  const std::pair<const char*, const std::string*> durations[] = {{"--elastic-timeout", &flags.elastic_timeout},
                                                                  {"--discovery-interval", &flags.discovery_interval},
                                                                  {"--heartbeat-timeout", &flags.heartbeat_timeout}};
  std::chrono::milliseconds* targets[] = {&options.elastic_timeout, &discovery_interval, &options.heartbeat_timeout};
  for (size_t i = 0; i < 3; ++i) {
    if (targets[i] == &discovery_interval && flags.discovery_interval == "auto") {
      discovery_interval = std::chrono::milliseconds(0);  // from the script's cost (host_source.h)
      continue;
    }
    auto d = parse_duration(*durations[i].second);
    if (!d.is_ok() || d.value().count() <= 0)
      return std::string(durations[i].first) + " " + *durations[i].second +
             " is not a positive duration; give seconds, e.g. 30, or 500ms, 2m" +
             (targets[i] == &discovery_interval ? std::string(", or auto") : std::string());
    *targets[i] = d.value();
  }
  return std::nullopt;
}

std::unique_ptr<HostSource> host_source(const JobOptions& base, const std::string& hostfile, const ElasticFlags& flags,
                                        std::chrono::milliseconds discovery_interval) {
  if (!hostfile.empty()) return std::make_unique<WatchedHostfile>(hostfile);
  if (flags.discovery_script.empty()) return std::make_unique<FixedHosts>(base.hosts);
  DiscoveryScriptOptions script;
  script.script = flags.discovery_script;
  script.slots_per_host = flags.slots_per_host;
  script.interval = discovery_interval;
  script.env = base.launcher_env;
  return std::make_unique<DiscoveryScript>(std::move(script));
}

}  // namespace

void add_elastic_flags(CLI::App& app, ElasticFlags& flags) {
  app.add_option("--min-np,--min-num-proc", flags.min_np, "Elastic: fewest workers to train with (default: -np)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-np,--max-num-proc", flags.max_np, "Elastic: most workers (default: every slot)")->check(CLI::PositiveNumber);
  app.add_option("--host-discovery-script", flags.discovery_script,
                 "Elastic: a script printing the current hosts, 'host:slots' or 'host' per line");
  app.add_option("--slots-per-host", flags.slots_per_host, "Elastic: slots of a discovered host printed without them")
      ->check(CLI::PositiveNumber);
  app.add_option("--discovery-interval", flags.discovery_interval,
                 "Elastic: how often to run the discovery script (default auto: 20 times its last run, 100ms to 1s)");
  app.add_option("--elastic-timeout", flags.elastic_timeout,
                 "Elastic: how long the job may stay below --min-np before it fails (seconds or 90s, 10m)");
  app.add_option("--reset-limit", flags.reset_limit, "Elastic: end the job after this many resets")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--blacklist-cooldown-range", flags.blacklist_cooldown,
                 "Elastic: MIN MAX seconds; a blacklisted host comes back after an exponential backoff between them")
      ->expected(2)
      ->allow_extra_args(false);
  app.add_option("--heartbeat-timeout", flags.heartbeat_timeout, "Elastic: a worker silent this long is lost");
  app.add_flag("--elastic", flags.elastic, "Run elastic with the default settings");
}

int run_elastic(JobOptions base, const std::string& hostfile, const ElasticFlags& flags) {
  ElasticDriverOptions options;
  options.min_np = flags.min_np > 0 ? flags.min_np : base.np;
  options.max_np = flags.max_np > 0 ? flags.max_np : options.max_np;
  options.reset_limit = flags.reset_limit;
  if (!hostfile.empty() && !flags.discovery_script.empty())
    return usage_error("--hostfile and --host-discovery-script both given; give one of them");
  std::chrono::milliseconds discovery_interval{0};
  if (auto bad = parse_durations(flags, options, discovery_interval)) return usage_error(*bad);
  if (!flags.blacklist_cooldown.empty()) {
    const double low = flags.blacklist_cooldown[0], high = flags.blacklist_cooldown[1];
    if (low <= 0 || high < low)
      return usage_error("--blacklist-cooldown-range " + std::to_string(low) + " " + std::to_string(high) +
                         ": need 0 < MIN <= MAX seconds");
    options.blacklist_cooldown = {std::chrono::milliseconds(static_cast<int64_t>(low * 1000)),
                                  std::chrono::milliseconds(static_cast<int64_t>(high * 1000))};
  }
  if (options.max_np < options.min_np)
    return usage_error("--max-np " + std::to_string(options.max_np) + " is below --min-np " +
                       std::to_string(options.min_np));
  auto hosts = host_source(base, hostfile, flags, discovery_interval);
  options.base = std::move(base);
  ElasticDriver driver(std::move(options), std::move(hosts));
  auto code = driver.run();
  if (!code.is_ok()) {
    log::error("{}", code.status().message());
    return code.status().code() == StatusCode::kInvalidArgument || code.status().code() == StatusCode::kNotFound
               ? kUsageError
               : 1;
  }
  return code.value();
}

}  // namespace edt::launcher
