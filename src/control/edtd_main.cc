// edtd: the edt daemon. Serves the REST API, keeps the database, and runs
// the reconcile loop that makes containers match it. Containers outlive edtd; a
// restarted edtd re-adopts them from the store, and by their label those it
// started but had not recorded (docs/platform.md, "Crash safety").
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "common/log.h"
#include "common/net.h"
#include "common/units.h"
#include "control/api/server.h"
#include "control/backends/fault_points.h"
#include "control/backends/local/cgroups.h"
#include "control/backends/local/container_log.h"
#include "control/backends/local/enter.h"
#include "control/backends/local/local_backend.h"
#include "control/backends/slurm/slurm_backend.h"
#include "control/backends/slurm/slurm_node.h"
#include "control/console/console_routes.h"
#include "control/db/database.h"
#include "control/jobs/job_runner.h"
#include "control/reconcile/reconciler.h"
#include "control/service/service.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;

struct Flags {
  std::string data_dir = "/var/lib/edt";
  std::string listen = "127.0.0.1:7470";
  std::string gpus;
  std::string network = "bridge";
  std::string address_range;  // empty: the mode's default
  std::string outbound;       // empty: nat with a bridge
  int ssh_port = 2222;
  std::string grace = "10s";
  std::string web_dir;
  std::string terminal_listen;  // empty: the API's host, any free port
  std::string log_level;        // empty: EDT_LOG_LEVEL's, else info
  std::string log_format = "text";
  std::string warm_start = "on";
  int64_t container_pids_max = -1;  // -1: the host's share (container_pids_share)
  std::string job_log_limit = "16MiB";
  std::string user_namespaces = "on";
  std::string container_disk = "10GiB";  // each container's writable dirs (disk_quota.h)
  std::string volume_size = "10GiB";     // each managed volume (disk_quota.h)
  bool fault_points = false;  // print them and exit
  // --backend slurm (slurm_backend.h).
  std::string backend = "local";
  std::string slurm_partition, slurm_account, slurm_qos, slurm_shared_dir, slurm_gateway;
  std::string slurm_interface = "eth0";
  bool network_given = false;  // --network or --outbound on the command line
};

// "NVIDIA-P4=8,NVIDIA-T4=2" -> simulated GPUs.
Result<std::vector<Gpu>> parse_gpu_flag(const std::string& text) {
  std::vector<Gpu> gpus;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    auto eq = item.find('=');
    int count = 0;
    if (eq != std::string::npos) {
      auto [ptr, ec] = std::from_chars(item.data() + eq + 1, item.data() + item.size(), count);
      if (ec != std::errc() || ptr != item.data() + item.size()) count = 0;
    }
    if (eq == 0 || eq == std::string::npos || count <= 0 || count > 1024)
      return invalid_argument("--gpus: '" + item + "' is not MODEL=COUNT; write e.g. --gpus NVIDIA-P4=8");
    for (int i = 0; i < count; ++i) gpus.push_back({static_cast<int>(gpus.size()), item.substr(0, eq), true, ""});
    start = end + 1;
  }
  return gpus;
}

// The GPUs nvidia-smi reports; none if it is missing or fails.
std::vector<Gpu> detect_gpus() {
  std::vector<Gpu> gpus;
  if (access("/usr/bin/nvidia-smi", X_OK) != 0) return gpus;
  FILE* p = popen("/usr/bin/nvidia-smi --query-gpu=index,name --format=csv,noheader 2>/dev/null", "r");
  if (!p) return gpus;
  std::array<char, 512> line;
  while (fgets(line.data(), line.size(), p)) {
    std::string text(line.data());
    auto comma = text.find(',');
    if (comma == std::string::npos) continue;
    std::string model = text.substr(comma + 1);
    while (!model.empty() && (model.front() == ' ')) model.erase(0, 1);
    while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
    for (auto& c : model)
      if (c == ' ') c = '-';
    gpus.push_back({std::atoi(text.c_str()), model, false, ""});
  }
  pclose(p);
  return gpus;
}

// Where this edtd's own files are: the tools and the Python package that
// containers get, and the web console. An edtd run from the build tree uses
// the build and source trees; any other finds them relative to its own
// executable (<prefix>/bin/edtd), so an installed tree or package works
// wherever it was put, without flags.
struct Layout {
  std::vector<std::string> tool_binds;  // bound read-only into containers
  std::vector<std::string> tool_path;
  std::string python_path;
  std::string web_dir;  // empty: no console was built
};

Layout find_layout() {
  Layout layout;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const std::string source_dir = EDT_SOURCE_DIR, binary_dir = EDT_BINARY_DIR;
  if (self.string().starts_with(binary_dir + "/")) {
    layout.tool_binds.push_back(source_dir);
    if (!binary_dir.starts_with(source_dir + "/")) layout.tool_binds.push_back(binary_dir);
    for (const char* sub : {"/src/launcher", "/bench", "/src/cli", "/src/control"})
      layout.tool_path.push_back(binary_dir + sub);
    layout.python_path = binary_dir + "/python";  // the package with its built extension
    if (fs::exists(binary_dir + "/web/dist/index.html")) layout.web_dir = binary_dir + "/web/dist";
    return layout;
  }
  const std::string prefix =
      ec ? std::string(EDT_INSTALL_PREFIX) : fs::weakly_canonical(self.parent_path() / EDT_BIN_TO_PREFIX).string();
  // /usr is in every container already (the image's), and Debian's python3
  // searches /usr/lib/python3/dist-packages; any other prefix is bound in
  // and named on PYTHONPATH.
  if (prefix != "/usr" && !prefix.starts_with("/usr/")) layout.tool_binds.push_back(prefix);
  if (prefix != "/usr") layout.python_path = prefix + "/" + EDT_PYTHON_INSTALL_DIR;
  layout.tool_path.push_back(prefix + "/" + EDT_INSTALL_BINDIR);
  const std::string console = prefix + "/" + EDT_INSTALL_DATADIR + "/edt/web";
  if (fs::exists(console + "/index.html")) layout.web_dir = console;
  return layout;
}

// Makes the admin when there is none, with its token in DATA_DIR/admin.token.
Status ensure_admin(Service& service, const std::string& data_dir) {
  EDT_ASSIGN_OR_RETURN(std::optional<std::string> token, service.ensure_admin());
  if (!token) return Status::ok();
  const std::string path = data_dir + "/admin.token";
  {
    std::ofstream out(path, std::ios::trunc);
    out << *token << "\n";
    if (!out) return io_error("write " + path, errno);
  }
  ::chmod(path.c_str(), 0600);
  log::info("made the admin token; it is in {}", path);
  return Status::ok();
}

// A HOST:PORT flag; a port of 0 (any free one) only where allow_any_port.
Result<net::HostPort> parse_listen_flag(const std::string& flag, const std::string& text, const std::string& example,
                                        bool allow_any_port) {
  auto parsed = net::parse_host_port(text, allow_any_port);
  if (!parsed.is_ok())
    return invalid_argument(flag + " '" + text + "' is not HOST:PORT; write e.g. " + flag + " " + example);
  return parsed;
}

// Everything the flags say, checked. Nothing is created until all of them
// are good, so a bad flag leaves no data dir, store or token behind.
struct Settings {
  std::optional<log::Level> log_level;  // nullopt: EDT_LOG_LEVEL's
  log::Format log_format = log::Format::kText;
  std::string bridge;  // empty: loopback networking
  AddressRange range;
  bool outbound_nat = false;
  std::chrono::milliseconds grace{};
  net::HostPort listen;
  net::HostPort terminal_listen;
  std::vector<Gpu> gpus;
  bool simulated_gpus = false;
  Layout layout;
  uint32_t first_subordinate_id = 0;  // 0: no user namespaces
  uint64_t container_disk = 0;        // bytes; 0: no bound
  uint64_t volume_size = 0;           // bytes; 0: no bound
  bool slurm = false;                 // --backend slurm
  std::string login_address;         // with slurm: this host's address toward the containers
  uint64_t job_log_limit = kDefaultJobLogLimit;
  int64_t pids_max = 0;      // each container's bound on tasks; 0: none
  std::string pids_warning;  // logged at start, if any
};

// --container-pids-max against the host's tasks (cgroups.h): the default is
// a container's share; more than that is warned of, since a few such
// containers take the tasks of the others; more than all containers
// together may have (edt-<key>'s bound, half the host's) is refused.
Status check_pids_max(int64_t flag, Settings& settings) {
  auto host = read_host_tasks();
  if (!host.is_ok() && flag < 0)
    return host.status().with_context("the default of --container-pids-max; give it a number");
  if (!host.is_ok()) {
    settings.pids_max = flag;
    return Status::ok();
  }
  const int64_t share = container_pids_share(*host), all = all_containers_pids_max(*host);
  settings.pids_max = flag < 0 ? share : flag;
  const std::string tasks = fmt::format("pid_max {}, threads-max {}", host->pid_max, host->threads_max);
  if (flag > all)
    return invalid_argument(fmt::format("--container-pids-max {} is over {}, what all containers together may have "
                                        "(half of this host's tasks: {}); write at most --container-pids-max {}, or "
                                        "leave it out for each container's share, {}",
                                        flag, all, tasks, all, share));
  if (flag == 0)
    settings.pids_warning = fmt::format("--container-pids-max 0: containers have no bound on their tasks, and one "
                                        "can take all of this host's ({}); leave the flag out for a share of {}",
                                        tasks, share);
  else if (flag > share)
    settings.pids_warning = fmt::format("--container-pids-max {} is over a container's share of this host's tasks "
                                        "({}; {}): {} such containers take the {} that all containers may have",
                                        flag, share, tasks, (all + flag - 1) / flag, all);
  return Status::ok();
}

// A disk bound's flag (disk_quota.h): 0 for none, else at least kMinDiskBytes.
Result<uint64_t> parse_disk_flag(const std::string& flag, const std::string& text, const std::string& example) {
  auto bytes = parse_size(text);
  if (!bytes.is_ok() || (*bytes != 0 && *bytes < kMinDiskBytes))
    return invalid_argument(flag + " '" + text + "' is not 0 or a size of at least 16MiB; write, e.g., " + flag +
                            " " + example);
  return *bytes;
}

// The host's first subordinate id of --user-namespaces: the default's
// ranges (2^28 and up, 61,440 users) are clear of /etc/subuid's usual
// 100000.. ranges of the host's own users.
constexpr uint32_t kFirstSubordinateId = 1u << 28;

Result<uint32_t> parse_user_namespaces(const std::string& text) {
  if (text == "off") return 0u;
  if (text == "on") return kFirstSubordinateId;
  uint64_t first = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), first);
  if (ec != std::errc() || ptr != text.data() + text.size() || first == 0 || first % 65536 != 0 ||
      first > (uint64_t{1} << 32) - 2 * 65536)
    return invalid_argument("--user-namespaces '" + text +
                            "' is not off, on or a host uid to start the subordinate ranges at (a multiple of "
                            "65536 below 2^32); write e.g. --user-namespaces on");
  return static_cast<uint32_t>(first);
}

// The address block of each network mode when --address-range is not
// given. A bridge's: inside 198.18.0.0/15 (RFC 2544's benchmarking block),
// which no host is handed by DHCP, Docker (172.17/16 and up), home and
// office networks (192.168/16, 10/8) or carrier-grade NAT and Tailscale
// (100.64/10) use; its upper half, as some proxies' fake-IP mode takes
// 198.18.0.0/16.
constexpr const char* kLoopbackRange = "127.77.0.0/16";
constexpr const char* kBridgeRange = "198.19.0.0/16";

// --network and --address-range; in bridge mode the range is checked
// against the host's addresses and routes.
Status check_network(const Flags& flags, Settings& settings) {
  EDT_ASSIGN_OR_RETURN(settings.bridge, ContainerNetwork::parse_mode(flags.network));
  const NetworkMode mode = settings.bridge.empty() ? NetworkMode::kLoopback : NetworkMode::kBridge;
  const std::string cidr =
      !flags.address_range.empty() ? flags.address_range : (settings.bridge.empty() ? kLoopbackRange : kBridgeRange);
  auto range = AddressRange::parse(cidr, mode);
  if (!range.is_ok()) return range.status().with_context("--address-range");
  settings.range = *range;
  if (!flags.outbound.empty() && flags.outbound != "nat" && flags.outbound != "none")
    return invalid_argument("--outbound '" + flags.outbound + "' is not nat or none; write --outbound none to keep "
                            "containers from connecting out of the host");
  if (mode == NetworkMode::kLoopback) {
    if (!flags.outbound.empty())
      return invalid_argument("--outbound needs a bridge: with --network loopback containers share the host's "
                              "network and reach what it reaches; drop --outbound, or use --network bridge");
    return Status::ok();
  }
  settings.outbound_nat = flags.outbound != "none";
  return ContainerNetwork::check_range_free(range->cidr(), range->base, range->size, settings.bridge);
}

// Whether this kernel lets edtd make a user namespace (it does not where
// the sysctl user.max_user_namespaces is 0). Tried in a child that exits.
Status check_user_namespaces_allowed() {
  const pid_t child = fork();
  if (child == 0) _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : 1);
  int status = 0;
  if (child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return Status::ok();
  return invalid_argument(
      "--user-namespaces: this kernel refuses to make a user namespace (is sysctl user.max_user_namespaces 0?); "
      "allow them, or start edtd with --user-namespaces off, which leaves container root the host's root");
}

// With user namespaces a container's root binds its files from the data dir
// as an unprivileged uid: every directory above it must let others pass.
Status check_passable_above(const std::string& data_dir) {
  std::error_code ec;
  for (fs::path dir = fs::absolute(data_dir, ec).parent_path(); !dir.empty(); dir = dir.parent_path()) {
    struct stat st {};
    std::array<char, 8> mode{};
    if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0 &&
        std::snprintf(mode.data(), mode.size(), "%o", st.st_mode & 07777) > 0)
      return invalid_argument("--user-namespaces: other users cannot pass through " + dir.string() + " (mode " +
                              mode.data() + "), above --data-dir " + data_dir +
                              "; run chmod o+x " + dir.string() + ", or choose a data dir under /var/lib");
    if (dir == dir.root_path()) break;
  }
  return Status::ok();
}

// --backend slurm's flags: the containers' addresses are a block of the
// nodes' network (--address-range, which the site keeps for them), so
// --network and --outbound have no say; the partition must exist.
Status check_slurm(const Flags& flags, Settings& settings) {
  settings.slurm = true;
  if (flags.network_given)
    return invalid_argument("--network and --outbound are the local backend's: with --backend slurm each container "
                            "has its own address on the nodes' network (--address-range); drop them");
  if (flags.slurm_partition.empty())
    return invalid_argument("--backend slurm needs --slurm-partition: the partition whose nodes run the containers");
  if (flags.slurm_shared_dir.empty() || !fs::path(flags.slurm_shared_dir).is_absolute())
    return invalid_argument("--backend slurm needs --slurm-shared-dir, an absolute directory on a file system that "
                            "the login node and every node of the partition mount at the same path");
  if (flags.address_range.empty())
    return invalid_argument("--backend slurm needs --address-range: a block of the nodes' network kept for "
                            "containers (nothing else may use it), e.g. --address-range 10.20.128.0/20");
  auto range = AddressRange::parse(flags.address_range, NetworkMode::kBridge);
  if (!range.is_ok()) return range.status().with_context("--address-range");
  settings.range = *range;
  const std::string& nic = flags.slurm_interface;
  if (nic.empty() || nic.size() > 15 || !std::all_of(nic.begin(), nic.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '_' || c == '-' || c == '.';
      }))
    return invalid_argument("--slurm-interface '" + nic + "' is not an interface name (letters, digits, '-', '_', "
                            "'.'; at most 15); name the nodes' interface on the network of --address-range, e.g. eth0");
  in_addr gateway{};
  if (!flags.slurm_gateway.empty() && inet_pton(AF_INET, flags.slurm_gateway.c_str(), &gateway) != 1)
    return invalid_argument("--slurm-gateway '" + flags.slurm_gateway + "' is not an IPv4 address; give the "
                            "router of the nodes' network, or leave it out");
  EDT_ASSIGN_OR_RETURN(settings.login_address, SlurmBackend::source_address_toward(range->address(range->first)));
  return SlurmBackend::partition_gpus(flags.slurm_partition).status();
}

Result<Settings> check_flags(const Flags& flags) {
  Settings settings;
  if (flags.backend != "local" && flags.backend != "slurm")
    return invalid_argument("--backend '" + flags.backend + "' is not local or slurm; write --backend slurm to place "
                            "containers on a Slurm cluster's nodes");
  if (!flags.log_level.empty()) {
    auto level = log::parse_level(flags.log_level);
    if (!level.is_ok())
      return invalid_argument("--log-level '" + flags.log_level +
                              "' is not a level; write one of trace, debug, info, warning, error, off");
    settings.log_level = *level;
  }
  if (flags.log_format != "text" && flags.log_format != "json")
    return invalid_argument("--log-format '" + flags.log_format + "' is not text or json; write --log-format json");
  settings.log_format = flags.log_format == "json" ? log::Format::kJson : log::Format::kText;
  auto job_log_limit = parse_size(flags.job_log_limit);
  if (!job_log_limit.is_ok() || *job_log_limit < kMinJobLogLimit)
    return invalid_argument("--job-log-limit '" + flags.job_log_limit + "' is not a size of at least 4KiB; write, "
                            "e.g., --job-log-limit 64MiB");
  settings.job_log_limit = *job_log_limit;
  EDT_RETURN_IF_ERROR(flags.backend == "slurm" ? check_slurm(flags, settings) : check_network(flags, settings));
  if (flags.backend == "local") EDT_RETURN_IF_ERROR(check_pids_max(flags.container_pids_max, settings));
  auto grace = parse_duration(flags.grace);
  if (!grace.is_ok()) return grace.status().with_context("--grace");
  settings.grace = *grace;
  EDT_ASSIGN_OR_RETURN(settings.listen, parse_listen_flag("--listen", flags.listen, "127.0.0.1:7470", false));
  settings.terminal_listen = {settings.listen.host, 0};
  if (!flags.terminal_listen.empty()) {
    EDT_ASSIGN_OR_RETURN(settings.terminal_listen,
                         parse_listen_flag("--terminal-listen", flags.terminal_listen, "127.0.0.1:7471", true));
  }
  if (flags.ssh_port < 1 || flags.ssh_port > 65535)
    return invalid_argument("--ssh-port " + std::to_string(flags.ssh_port) +
                            " is not a port; write e.g. --ssh-port 2222");
  if (!flags.gpus.empty()) {
    EDT_ASSIGN_OR_RETURN(settings.gpus, parse_gpu_flag(flags.gpus));
    settings.simulated_gpus = true;
  }
  EDT_ASSIGN_OR_RETURN(settings.container_disk, parse_disk_flag("--container-disk", flags.container_disk, "20GiB"));
  EDT_ASSIGN_OR_RETURN(settings.volume_size, parse_disk_flag("--volume-size", flags.volume_size, "100GiB"));
  EDT_ASSIGN_OR_RETURN(settings.first_subordinate_id, parse_user_namespaces(flags.user_namespaces));
  if (settings.first_subordinate_id != 0) {
    EDT_RETURN_IF_ERROR(check_user_namespaces_allowed());
    EDT_RETURN_IF_ERROR(check_passable_above(flags.data_dir));
    if (settings.slurm) EDT_RETURN_IF_ERROR(check_passable_above(flags.slurm_shared_dir + "/x"));
  }
  std::error_code ec;
  if (fs::exists(flags.data_dir, ec) && !fs::is_directory(flags.data_dir, ec))
    return invalid_argument("--data-dir " + flags.data_dir + " exists and is not a directory; give a directory");
  if (Status st = check_fault_setting(); !st.is_ok()) return st;
  settings.layout = find_layout();
  if (!flags.web_dir.empty()) {
    if (!fs::exists(flags.web_dir + "/index.html", ec))
      return invalid_argument("--web-dir " + flags.web_dir +
                              " holds no index.html; give the console's built files (the build puts them in "
                              "build/web/dist, an install in <prefix>/share/edt/web)");
    settings.layout.web_dir = flags.web_dir;
  }
  // Last, once every flag is good: the bridge is this edtd's from here on.
  if (!settings.bridge.empty()) EDT_RETURN_IF_ERROR(ContainerNetwork::claim_bridge(settings.bridge, flags.data_dir));
  return settings;
}

int fail(const Status& st) {
  log::error("{}", st.message());
  return 1;
}

// Makes the data dir (0700) and opens the database in it.
Result<std::unique_ptr<Database>> open_database(const Flags& flags) {
  std::error_code ec;
  fs::create_directories(flags.data_dir, ec);
  if (ec) return Status(StatusCode::kIoError, "--data-dir " + flags.data_dir + ": " + ec.message());
  ::chmod(flags.data_dir.c_str(), 0700);
  EDT_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::open(flags.data_dir + "/edtd.db"));
  // SQLite makes its -wal and -shm files with the database's mode.
  ::chmod((flags.data_dir + "/edtd.db").c_str(), 0600);
  return db;
}

// Blocks SIGTERM and SIGINT in every thread (sigwait takes them) and
// ignores SIGPIPE; returns the set to wait for.
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

// The bridge's options, with a warning logged if the host's firewall would
// drop its traffic; none with loopback networking.
std::optional<ContainerNetworkOptions> network_options(const Flags& flags, const Settings& settings) {
  if (settings.bridge.empty()) return std::nullopt;
  const std::string warning = ContainerNetwork::firewall_warning(settings.bridge, settings.outbound_nat);
  if (!warning.empty()) log::warn("{}", warning);
  return ContainerNetworkOptions{settings.bridge, settings.range.gateway(), settings.range.prefix(),
                                 flags.data_dir + "/containers", settings.outbound_nat, settings.range.cidr(), "", ""};
}

// The GPUs of the Slurm partition, as GRES: edtd counts them so a cluster
// never asks for more than the partition has; Slurm says which a job gets.
Result<std::vector<Gpu>> slurm_gpus(const std::string& partition) {
  EDT_ASSIGN_OR_RETURN(auto models, SlurmBackend::partition_gpus(partition));
  std::vector<Gpu> gpus;
  for (const auto& [model, count] : models)
    for (int i = 0; i < count; ++i) gpus.push_back({static_cast<int>(gpus.size()), model, false, ""});
  return gpus;
}

// The backend of --backend, with the files its containers see.
std::unique_ptr<LocalBackend> make_backend(const Flags& flags, const Settings& settings,
                                           const std::map<std::string, std::string>& base_env) {
  if (settings.slurm) {
    std::error_code ec;
    const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
    return std::make_unique<SlurmBackend>(
        LocalBackendOptions{flags.slurm_shared_dir, flags.ssh_port, settings.layout.tool_binds,
                            settings.layout.tool_path, "", {}, "", std::nullopt, 0, "/sys/fs/cgroup",
                            settings.first_subordinate_id, DiskBound{}},
        SlurmBackendOptions{{flags.slurm_partition, flags.slurm_account, flags.slurm_qos},
                            self,
                            flags.slurm_interface,
                            flags.slurm_gateway,
                            settings.range.prefix(),
                            settings.login_address,
                            settings.range.cidr()});
  }
  if (!settings.pids_warning.empty()) log::warn("{}", settings.pids_warning);
  auto backend = std::make_unique<LocalBackend>(LocalBackendOptions{
      flags.data_dir, flags.ssh_port, settings.layout.tool_binds, settings.layout.tool_path, "",
      {flags.warm_start == "on", "/usr/bin/python3", flags.data_dir + "/warm", flags.data_dir + "/containers", base_env,
       /*seccomp_path: the backend's*/ ""},
      /*enter_program: edtd itself*/ "", network_options(flags, settings), settings.pids_max, "/sys/fs/cgroup",
      settings.first_subordinate_id, DiskBound{settings.container_disk, 0}});
  backend->keep_warm();
  return backend;
}

// Each managed volume's bound (--volume-size), or none with a warning where
// bounded disks cannot be made; none under Slurm, whose nodes would not see
// a loop mount of the gateway's.
DiskBound volume_disk(const Settings& settings) {
  if (settings.volume_size == 0 || settings.slurm) return {};
  if (std::string why = bounded_disks_unavailable(); !why.empty()) {
    log::warn("--volume-size {}: volumes are plain directories with no bound on their bytes, since {}",
              settings.volume_size, why);
    return {};
  }
  return {settings.volume_size, 0, true};
}

// edtd's parts, made in dependency order; serves until SIGTERM or SIGINT.
int serve(const Flags& flags, const Settings& settings) {
  const auto& [host, port] = settings.listen;
  std::vector<Gpu> gpus = settings.simulated_gpus ? settings.gpus : detect_gpus();
  if (settings.slurm && !settings.simulated_gpus) {
    auto found = slurm_gpus(flags.slurm_partition);
    if (!found.is_ok()) return fail(found.status());
    gpus = *found;
  }
  auto opened = open_database(flags);
  if (!opened.is_ok()) return fail(opened.status());
  std::unique_ptr<Database> db = std::move(opened).value();

  std::map<std::string, std::string> base_env = {{"PATH", LocalBackend::container_path(settings.layout.tool_path)},
                                                 {"LANG", "C.UTF-8"}};
  if (!settings.layout.python_path.empty()) base_env["PYTHONPATH"] = settings.layout.python_path;
  const std::unique_ptr<LocalBackend> owned = make_backend(flags, settings, base_env);
  LocalBackend& backend = *owned;
  JobRunner jobs(db.get(), &backend, flags.data_dir, base_env, {"", settings.job_log_limit});
  ReconcilerOptions reconciler_options;
  reconciler_options.grace = settings.grace;
  reconciler_options.base_env = base_env;
  reconciler_options.on_resync = [&jobs] { jobs.refresh_running(); };
  Reconciler reconciler(db.get(), &backend, reconciler_options);
  // Managed volumes live where the containers' nodes see them.
  const std::string volumes_under = settings.slurm ? flags.slurm_shared_dir : flags.data_dir;
  Service service(db.get(), {settings.range, volumes_under, [&reconciler](const std::string& c) { reconciler.enqueue(c); },
                             volume_disk(settings)});
  if (Status st = service.remount_volumes(); !st.is_ok()) return fail(st);
  if (Status st = service.set_inventory({"edt", "/", {"horovod", "deepspeed", "megatron", "slurm"}, true}, gpus); !st.is_ok()) return fail(st);
  if (Status st = ensure_admin(service, flags.data_dir); !st.is_ok()) return fail(st);

  std::error_code ec;
  fs::create_directories(flags.data_dir + "/terminals", ec);
  ::chmod((flags.data_dir + "/terminals").c_str(), 0700);
  TerminalServer terminals(flags.data_dir + "/terminals");
  if (Status st = terminals.start(settings.terminal_listen.host, settings.terminal_listen.port); !st.is_ok())
    return fail(st);
  ApiServerOptions api_options;
  api_options.service = &service;
  api_options.backend = &backend;
  api_options.reconciler = &reconciler;
  api_options.jobs = &jobs;
  api_options.web_dir = settings.layout.web_dir;
  JupyterServers jupyter_servers(&backend, flags.data_dir + "/jupyter", base_env);
  JupyterProxy jupyter(jupyter_proxy_options(&service, &jupyter_servers));
  api_options.extra_routes = console_routes({&service, &backend, &jobs, &terminals, &jupyter});
  api_options.prefix_handlers = {{JupyterProxy::kPrefix, [&jupyter](Request& request) { return jupyter.handle(request); }}};
  ApiServer api(std::move(api_options));

  sigset_t signals = block_signals();
  if (Status st = api.start(host, port); !st.is_ok()) return fail(st);
  reconciler.start();
  log::info("serving http://{}:{}/api/v1 (data in {}, {} GPUs{}; console {})", host, port, flags.data_dir, gpus.size(),
            settings.simulated_gpus ? ", simulated" : "",
            settings.layout.web_dir.empty() ? "not built" : settings.layout.web_dir);
  int sig = 0;
  sigwait(&signals, &sig);
  log::info("stopping on signal {}; containers keep running", sig);
  api.stop();
  reconciler.stop();
  return 0;
}

int run(const Flags& flags) {
  if (flags.fault_points) {
    std::fputs(fault_points_table().c_str(), stdout);
    return 0;
  }
  log::init("edtd");
  auto checked = check_flags(flags);
  if (!checked.is_ok()) return fail(checked.status());
  log::init("edtd", checked->log_level.value_or(log::level()), checked->log_format);
  return serve(flags, *checked);
}

}  // namespace
}  // namespace edt::control

int main(int argc, char** argv) {
  // A job's way into its container (local_backend.h): before anything else.
  // It ends by _exit: it sees the container's /proc, where it is not listed
  // (it stays in edtd's PID namespace), so exit handlers that look for the
  // process's threads there (LeakSanitizer's, in a sanitizer build) wait
  // forever; and it has nothing to flush.
  if (argc > 1 && std::string_view(argv[1]) == edt::control::kEnterContainerCommand)
    _exit(edt::control::enter_container_main(argc, argv));
  // The helpers edtd starts as its own program: a container's log writer
  // (container_log.h, which holds nothing of edtd's), a job's (job_log.h),
  // and a container's Slurm job on its node (slurm_node.h).
  using Main = int (*)(int, char**);
  constexpr std::pair<std::string_view, Main> kHelpers[] = {
      {edt::control::kContainerLogCommand, edt::control::container_log_main},
      {edt::control::kJobLogCommand, edt::control::job_log_main},
      {edt::control::kSlurmNodeCommand, edt::control::slurm_node_main}};
  for (const auto& [command, helper_main] : kHelpers)
    if (argc > 1 && std::string_view(argv[1]) == command) return helper_main(argc, argv);
  edt::control::Flags flags;
  CLI::App app{"edtd: the edt daemon (REST API, store, reconcile loop)"};
  app.add_option("--data-dir", flags.data_dir, "where the store, keys, containers and volumes live")->capture_default_str();
  app.add_option("--listen", flags.listen, "HOST:PORT of the API")->capture_default_str();
  app.add_option("--gpus", flags.gpus, "declare simulated GPUs, MODEL=COUNT[,MODEL=COUNT...] (default: nvidia-smi)");
  app.add_option("--network", flags.network,
                 "bridge[:NAME]: each container in a network namespace of its own on bridge NAME (default edt0), "
                 "which edtd makes; loopback: containers share the host's network, each on a 127.x address")
      ->capture_default_str();
  app.add_option("--outbound", flags.outbound,
                 "with a bridge: nat (the default) lets containers connect out of the host, their address "
                 "masqueraded as the host's; none keeps them on the bridge (neither lets anything reach the host "
                 "itself or another cluster)");
  app.add_option("--address-range", flags.address_range,
                 "addresses given to containers (default: 127.77.0.0/16 with --network loopback, inside 127.0.0.0/8; "
                 "198.19.0.0/16 with a bridge, outside 127/8 and apart from the host's addresses and routes)");
  app.add_option("--ssh-port", flags.ssh_port, "port of sshd on each container's address")->capture_default_str();
  app.add_option("--grace", flags.grace, "SIGTERM to SIGKILL when a container goes")->capture_default_str();
  app.add_option("--web-dir", flags.web_dir,
                 "the web console's built files, served at / (default: <prefix>/share/edt/web, or the build tree's)");
  app.add_option("--terminal-listen", flags.terminal_listen,
                 "HOST:PORT of the console's terminal WebSockets (default: the API's host, any free port)");
  app.add_option("--log-level", flags.log_level,
                 "trace, debug, info, warning, error or off (default: EDT_LOG_LEVEL's, else info)");
  app.add_option("--log-format", flags.log_format, "text, or json for one JSON object per line")
      ->capture_default_str();
  app.add_option("--warm-start", flags.warm_start,
                 "on: a warm Python interpreter (torch imported) starts Python workers that join a job in "
                 "containers; off: they start Python afresh")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--container-pids-max", flags.container_pids_max,
                 "the most tasks (processes and threads) each container may have, in its cgroup (default: its share "
                 "of the host's, min(4096, pid_max/16); at most pid_max/2, what all containers together may have); "
                 "0: no bound")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 22));
  app.add_option("--job-log-limit", flags.job_log_limit,
                 "the most a job's log keeps (its first and its last output, with a marker line where the rest "
                 "was dropped), e.g. 64MiB")
      ->capture_default_str();
  app.add_option("--container-disk", flags.container_disk,
                 "the most bytes each container's writable dirs (/root, /tmp, /var) hold together, as a disk of "
                 "their own with one file per 16 KiB; a write past it fails with ENOSPC; 0: no bound")
      ->capture_default_str();
  app.add_option("--volume-size", flags.volume_size,
                 "the most bytes each volume edtd makes holds, as a disk of its own (<data-dir>/volume-disks) with "
                 "one file per 16 KiB; a write past it fails with ENOSPC, an upload with 413; 0: plain directories, "
                 "no bound. Volumes made before keep the size they were made with")
      ->capture_default_str();
  app.add_option("--user-namespaces", flags.user_namespaces,
                 "on: each container in a user namespace, its root an unprivileged host uid of its owner's "
                 "subordinate range (65536 ids each, from host uid 2^28); a number: the ranges start there; off: "
                 "container root is the host's root")
      ->capture_default_str();
  app.add_option("--backend", flags.backend,
                 "local: containers on this machine; slurm: each container a Slurm job on a node of "
                 "--slurm-partition (edtd runs on a login node; docs/slurm.md)")
      ->capture_default_str();
  app.add_option("--slurm-partition", flags.slurm_partition, "with --backend slurm: the partition of the containers' jobs");
  app.add_option("--slurm-account", flags.slurm_account, "with --backend slurm: the jobs' account (default: Slurm's)");
  app.add_option("--slurm-qos", flags.slurm_qos, "with --backend slurm: the jobs' QoS (default: Slurm's)");
  app.add_option("--slurm-shared-dir", flags.slurm_shared_dir,
                 "with --backend slurm: a directory at the same path on the login node and every node (a shared "
                 "file system): the clusters' hostfiles and keys, the containers' own files, the jobs' output");
  app.add_option("--slurm-interface", flags.slurm_interface,
                 "with --backend slurm: the nodes' interface on the network of --address-range; each container "
                 "gets a macvlan of it")
      ->capture_default_str();
  app.add_option("--slurm-gateway", flags.slurm_gateway,
                 "with --backend slurm: the containers' default gateway on the nodes' network (default: none, "
                 "every address on-link)");
  app.add_flag("--fault-points", flags.fault_points,
               "print the named points where EDT_FAULT=<name> makes edtd abort (for crash tests), and exit");
  CLI11_PARSE(app, argc, argv);
  flags.network_given = app.count("--network") + app.count("--outbound") > 0;
  return edt::control::run(flags);
}
