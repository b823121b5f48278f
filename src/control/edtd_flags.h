// edtd's command line: the flags as given (Flags), their options on the
// command line (add_flags), and what they say once checked (Settings).
//
// check_flags() checks every flag before edtd makes anything, so a bad flag
// leaves no data dir, store or token behind; its one side effect, last and
// only once all are good, is claiming --network's bridge for this data dir.
// An error is kInvalidArgument naming the flag and what to write instead.
// Called once, from main's thread.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/net.h"
#include "control/allocation/allocation.h"
#include "control/backends/backend.h"
#include "control/jobs/job_log.h"
#include "control/model/catalog.h"
#include "edt/status.h"

namespace edt::control {

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
  std::string venv;             // empty: kDefaultVenv where it exists; "none"
  std::string terminal_listen;  // empty: the API's host, any free port
  std::string log_level;        // empty: EDT_LOG_LEVEL's, else info
  std::string log_format = "text";
  std::string warm_start = "on";
  int64_t container_pids_max = -1;  // -1: the host's share (container_pids_share)
  std::string job_log_limit = "16MiB";
  std::string user_namespaces = "on";
  std::string container_disk = "10GiB";  // each container's writable dirs (disk_quota.h)
  std::string volume_size = "10GiB";     // each managed volume (disk_quota.h)
  std::string image_store;               // empty: <data_dir>/images (docs/images.md)
  std::string registry_ca_file;          // pulls: empty, the system's CAs
  std::vector<std::string> registry_mirrors;  // pulls: "REGISTRY=URL"
  bool fault_points = false;  // print them and exit
  // --backend slurm (slurm_backend.h).
  std::string backend = "local";
  std::string slurm_partition, slurm_account, slurm_qos, slurm_shared_dir, slurm_gateway;
  std::string slurm_interface = "eth0";
  std::string slurm_mode = "root";          // root: root jobs, a macvlan each; user: jobs as edtd's user
  std::string slurm_ports = "41000-41999";  // --slurm-mode user: the containers' sshd ports
  bool network_given = false;  // --network or --outbound on the command line
};

// Registers every flag of edtd on `app`, writing into `flags`.
void add_flags(CLI::App& app, Flags& flags);

// Where `make deps` makes edt's virtual environment (scripts/install-deps.sh,
// EDT_VENV there): JupyterLab and the other PyPI packages, on Debian's python3.
inline constexpr const char* kDefaultVenv = "/opt/edt/venv";

// Where an installed edt's tools and Python package are in every container
// (find_layout): laid out as under the prefix, whatever the prefix and the
// image (an image's /usr is its own, without the host's /usr/bin/edtrun).
inline constexpr const char* kInstallInContainer = "/run/edt-install";

// Where this edtd's own files are: the tools and the Python package that
// containers get, and the web console. An edtd run from the build tree uses
// the build and source trees, bound at their own paths; any other finds them
// relative to its own executable (<prefix>/bin/edtd), so an installed tree
// or package works wherever it was put, without flags, and binds them at
// kInstallInContainer. The venv (--venv) is bound at its own path, its bin
// on PATH after edt's tools.
struct Layout {
  std::vector<SandboxMount> tool_binds;  // bound read-only into containers
  std::vector<std::string> tool_path;     // edt's tools, then the venv's bin
  std::string venv;                       // empty: none
  std::string python_path;
  std::string web_dir;                    // empty: no console was built
};

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
  bool slurm_own_user = false;        // --slurm-mode user
  std::string login_address;         // with slurm: this host's address toward the containers
  std::string image_store;           // --image-store, or its default: <data-dir>/images; <shared>/images with slurm
  uint64_t job_log_limit = kDefaultJobLogLimit;
  int64_t pids_max = 0;      // each container's bound on tasks; 0: none
  std::string pids_warning;  // logged at start, if any
};

Result<Settings> check_flags(const Flags& flags);

}  // namespace edt::control
