// What edtd gives a cluster's containers from its model (cluster.h): the
// hostfile every container sees (/etc/mpi/hostfile, /job/hostfile) and each
// container's environment (its sessions' and jobs'). Pure functions of
// their arguments; any thread may call them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "control/model/cluster.h"

namespace edt::control {

// The containers that are Running and not leaving: the hostfile's lines.
std::vector<ContainerStatus> running_containers(const std::vector<ContainerStatus>& containers);

// The hostfile of a cluster: the given containers, launcher first,
// "name slots=N", N its GPUs (1 without).
std::string render_hostfile(const std::vector<ContainerStatus>& containers);

// The environment of a container: `base` (edt's PATH, PYTHONPATH), then
// edt's own variables, CUDA_VISIBLE_DEVICES, the framework's (DeepSpeed:
// PDSH_RCMD_TYPE=ssh, WCOLL, OMPI_ALLOW_RUN_AS_ROOT*; Megatron-LM: MASTER_ADDR, MASTER_PORT, NODE_RANK,
// GPUS_PER_NODE, CUDA_DEVICE_MAX_CONNECTIONS=1), then the spec's env.
std::map<std::string, std::string> container_env(const ClusterSpec& spec, const ContainerStatus& container,
                                                 const std::map<std::string, std::string>& base);

}  // namespace edt::control
