#include "edtd_flags.h"

#include <arpa/inet.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "common/units.h"
#include "control/backends/fault_points.h"
#include "control/backends/local/cgroups.h"
#include "control/backends/local/container_network.h"
#include "control/backends/local/disk_quota.h"
#include "control/backends/slurm/slurm_backend.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

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

// A tree bound read-only at its own path.
SandboxMount same_path(const std::string& tree) { return {tree, tree, true}; }

// What containers get of an install under `prefix`, bound at
// kInstallInContainer: the tools that need only glibc (edtrun, horovodrun,
// edt-warm-run, libexec/edt), and the Python package with the
// usercustomize.py that makes horovod_compat a fallback on PYTHONPATH.
void bind_install(const std::string& prefix, Layout& layout) {
  const std::string in = kInstallInContainer, bin = EDT_INSTALL_BINDIR, python = EDT_PYTHON_INSTALL_DIR;
  const std::string customize = std::string(EDT_INSTALL_DATADIR) + "/edt/python";
  std::error_code ec;
  for (const std::string& piece : {bin + "/edtrun", bin + "/horovodrun", bin + "/edt-warm-run",
                                   std::string(EDT_INSTALL_LIBEXECDIR) + "/edt", python + "/edt",
                                   python + "/horovod_compat", customize})
    if (fs::exists(prefix + "/" + piece, ec)) layout.tool_binds.push_back({prefix + "/" + piece, in + "/" + piece, true});
  layout.tool_path = {in + "/" + bin, prefix + "/" + bin};
  layout.python_path = in + "/" + python + ":" + in + "/" + customize;
}

Layout find_layout() {
  Layout layout;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const std::string source_dir = EDT_SOURCE_DIR, binary_dir = EDT_BINARY_DIR;
  if (self.string().starts_with(binary_dir + "/")) {
    layout.tool_binds.push_back(same_path(source_dir));
    if (!binary_dir.starts_with(source_dir + "/")) layout.tool_binds.push_back(same_path(binary_dir));
    for (const char* sub : {"/src/launcher", "/bench", "/src/cli", "/src/control"})
      layout.tool_path.push_back(binary_dir + sub);
    layout.python_path = binary_dir + "/python";  // the package with its built extension
    if (fs::exists(binary_dir + "/web/dist/index.html")) layout.web_dir = binary_dir + "/web/dist";
    return layout;
  }
  const std::string prefix =
      ec ? std::string(EDT_INSTALL_PREFIX) : fs::weakly_canonical(self.parent_path() / EDT_BIN_TO_PREFIX).string();
  bind_install(prefix, layout);
  // A prefix of edt's own (/opt/edt) is bound whole too, for the host's
  // image: its other programs (edt, edt-bench) are on PATH after the
  // portable ones. /usr and what is under it are every image's own.
  if (prefix != "/usr" && !prefix.starts_with("/usr/")) layout.tool_binds.push_back(same_path(prefix));
  const std::string console = prefix + "/" + EDT_INSTALL_DATADIR + "/edt/web";
  if (fs::exists(console + "/index.html")) layout.web_dir = console;
  return layout;
}

// --venv: the venv bound read-only at its own path, its bin on PATH after
// edt's tools. Left out: kDefaultVenv where `make deps` made it, else none
// (Debian's python3 alone). Named: it must be a venv.
Status add_venv(const std::string& flag, Layout& layout) {
  if (flag == "none") return Status::ok();
  const std::string venv = flag.empty() ? kDefaultVenv : flag;
  std::error_code ec;
  const bool present = fs::exists(venv + "/pyvenv.cfg", ec) && fs::exists(venv + "/bin/python3", ec);
  if (flag.empty() && !present) return Status::ok();
  if (!fs::path(venv).is_absolute() || !present)
    return invalid_argument("--venv " + venv + " is not a virtual environment (an absolute directory with pyvenv.cfg "
                            "and bin/python3); give the one `make deps` makes (" + kDefaultVenv +
                            ", or where EDT_VENV put it), or --venv none");
  layout.venv = fs::path(venv).lexically_normal().string();
  if (layout.venv.size() > 1 && layout.venv.back() == '/') layout.venv.pop_back();
  layout.tool_binds.push_back(same_path(layout.venv));
  layout.tool_path.push_back(layout.venv + "/bin");
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

// --slurm-mode user: edtd runs as the account its jobs run as, never root;
// each container's slot is a port of --slurm-ports (slurm_jobs.h
// slot_port), so no address of the nodes' network is edt's.
Status check_slurm_user_mode(const Flags& flags, Settings& settings) {
  if (::geteuid() == 0)
    return invalid_argument("--slurm-mode user runs every job as edtd's own user, and edtd runs as root: start it "
                            "as the service account the site gives it (e.g. runuser -u edt -- edtd ...), or use "
                            "--slurm-mode root");
  if (!flags.address_range.empty())
    return invalid_argument("--address-range is --slurm-mode root's: with --slurm-mode user containers use their "
                            "nodes' addresses, each with a port of --slurm-ports; drop it");
  int first = 0, last = 0;
  char tail = 0;
  if (std::sscanf(flags.slurm_ports.c_str(), "%d-%d%c", &first, &last, &tail) != 2 || first < 1024 ||
      last > 65535 || first > last)
    return invalid_argument("--slurm-ports '" + flags.slurm_ports + "' is not FIRST-LAST, two ports from 1024 to "
                            "65535, FIRST not above LAST; write e.g. --slurm-ports 41000-41999");
  settings.slurm_own_user = true;
  settings.range.base = 0;
  settings.range.first = static_cast<uint32_t>(first);
  settings.range.size = static_cast<uint32_t>(last) + 2;
  settings.range.what = "port is left in --slurm-ports " + flags.slurm_ports;
  settings.range.larger = "--slurm-ports";
  return SlurmBackend::partition_gpus(flags.slurm_partition).status();
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
  if (flags.slurm_mode != "root" && flags.slurm_mode != "user")
    return invalid_argument("--slurm-mode '" + flags.slurm_mode + "' is not root or user; write --slurm-mode user to "
                            "run the jobs as edtd's own user");
  if (flags.slurm_mode == "user") return check_slurm_user_mode(flags, settings);
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

// Where images are unpacked: with --backend slurm, in the shared directory,
// which every node reads them from (docs/slurm.md, "Images").
// Checked before the backend's flags, which refuse a missing shared dir.
Status check_image_store(const Flags& flags, Settings& settings) {
  const bool slurm = flags.backend == "slurm";
  if (flags.image_store.empty()) {
    settings.image_store = (slurm ? flags.slurm_shared_dir : flags.data_dir) + "/images";
    return Status::ok();
  }
  settings.image_store = fs::path(flags.image_store).lexically_normal().string();
  if (!fs::path(flags.image_store).is_absolute())
    return invalid_argument("--image-store " + flags.image_store + " is not an absolute path; give one");
  if (slurm && !flags.slurm_shared_dir.empty() &&
      !path_within(settings.image_store, fs::path(flags.slurm_shared_dir).lexically_normal().string()))
    return invalid_argument("--image-store " + flags.image_store + " is not under --slurm-shared-dir " +
                            flags.slurm_shared_dir + ": the nodes read the images' roots from it; put it there, or "
                            "leave it out (default: " + flags.slurm_shared_dir + "/images)");
  return Status::ok();
}

// The API's, the network's and the log's flags.
void add_service_flags(CLI::App& app, Flags& flags) {
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
  app.add_option("--venv", flags.venv,
                 std::string("edt's virtual environment (make deps: JupyterLab...), bound read-only into containers "
                             "at the same path, its bin on PATH after edt's tools; none: Debian's python3 alone "
                             "(default: ") + kDefaultVenv + " where it exists)");
  app.add_option("--terminal-listen", flags.terminal_listen,
                 "HOST:PORT of the console's terminal WebSockets (default: the API's host, any free port)");
  app.add_option("--log-level", flags.log_level,
                 "trace, debug, info, warning, error or off (default: EDT_LOG_LEVEL's, else info)");
  app.add_option("--log-format", flags.log_format, "text, or json for one JSON object per line")
      ->capture_default_str();
}

// The bounds and isolation of each container.
void add_container_flags(CLI::App& app, Flags& flags) {
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
  app.add_option("--registry-ca-file", flags.registry_ca_file,
                 "pulls (edt image pull) trust the registries' certificates that this PEM file's CAs signed, instead "
                 "of the system's CAs")
      ->check(CLI::ExistingFile);
  app.add_option("--registry-mirror", flags.registry_mirrors,
                 "REGISTRY=URL: pulls from REGISTRY (as a reference names it: docker.io, nvcr.io, host:port) ask the "
                 "mirror at URL (https://host[:port], or http://) first, anonymously; repeatable");
  app.add_option("--image-store", flags.image_store,
                 "the image store that imported and pulled images are unpacked into (docs/images.md); default: "
                 "<data-dir>/images, and with --backend slurm <slurm-shared-dir>/images, where the nodes read them "
                 "(it must be under the shared directory). Its images' roots are named by absolute path: move it only "
                 "with them");
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
}

// --backend and the Slurm backend's flags.
void add_slurm_flags(CLI::App& app, Flags& flags) {
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
  app.add_option("--slurm-mode", flags.slurm_mode,
                 "with --backend slurm: root (jobs as root, each container its own address: --address-range) or "
                 "user (jobs as edtd's own user, no root anywhere; containers on their nodes' network, each "
                 "with a port of --slurm-ports; docs/slurm.md)")
      ->capture_default_str();
  app.add_option("--slurm-ports", flags.slurm_ports,
                 "with --slurm-mode user: the ports the containers' sshd listen on, one each, FIRST-LAST")
      ->capture_default_str();
}

}  // namespace

void add_flags(CLI::App& app, Flags& flags) {
  add_service_flags(app, flags);
  add_container_flags(app, flags);
  add_slurm_flags(app, flags);
  app.add_flag("--fault-points", flags.fault_points,
               "print the named points where EDT_FAULT=<name> makes edtd abort (for crash tests), and exit");
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
  EDT_RETURN_IF_ERROR(check_image_store(flags, settings));
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
  // --slurm-mode user: each container's user namespace is bubblewrap's,
  // mapping edtd's user alone.
  if (settings.slurm_own_user) settings.first_subordinate_id = 0;
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
  EDT_RETURN_IF_ERROR(add_venv(flags.venv, settings.layout));
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

}  // namespace edt::control
