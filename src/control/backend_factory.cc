#include "backend_factory.h"

#include <filesystem>
#include <optional>

#include "common/log.h"
#include "control/backends/local/container_network.h"
#include "control/backends/slurm/slurm_backend.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

// The bridge's options, with a warning logged if the host's firewall would
// drop its traffic; none with loopback networking.
std::optional<ContainerNetworkOptions> network_options(const Flags& flags, const Settings& settings) {
  if (settings.bridge.empty()) return std::nullopt;
  const std::string warning = ContainerNetwork::firewall_warning(settings.bridge, settings.outbound_nat);
  if (!warning.empty()) log::warn("{}", warning);
  return ContainerNetworkOptions{settings.bridge, settings.range.gateway(), settings.range.prefix(),
                                 flags.data_dir + "/containers", settings.outbound_nat, settings.range.cidr(), "", ""};
}

}  // namespace

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
                            settings.range.cidr(),
                            settings.slurm_own_user});
  }
  if (!settings.pids_warning.empty()) log::warn("{}", settings.pids_warning);
  // The warm interpreter is the containers' python3: the venv's where its
  // bin is on their PATH, so that its workers have the venv's packages.
  const std::string python = settings.layout.venv.empty() ? "/usr/bin/python3" : settings.layout.venv + "/bin/python3";
  auto backend = std::make_unique<LocalBackend>(LocalBackendOptions{
      flags.data_dir, flags.ssh_port, settings.layout.tool_binds, settings.layout.tool_path, "",
      {flags.warm_start == "on", python, flags.data_dir + "/warm", flags.data_dir + "/containers", base_env,
       /*seccomp_path: the backend's*/ ""},
      /*enter_program: edtd itself*/ "", network_options(flags, settings), settings.pids_max, "/sys/fs/cgroup",
      settings.first_subordinate_id, DiskBound{settings.container_disk, 0}});
  backend->keep_warm();
  return backend;
}

}  // namespace edt::control
