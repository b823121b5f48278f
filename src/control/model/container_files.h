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

// A container's GPU variables, for its GPUs `host_gpus` (the host's
// indices). The container has only their device files (/dev/nvidia<host
// index>), and CUDA numbers the devices it can open 0..n-1 in the host's
// order, as under Slurm's ConstrainDevices or Kubernetes' device plugin:
// so CUDA_VISIBLE_DEVICES=0,..,n-1; the host's indices, ascending (CUDA's
// device i is the i-th), stay in EDT_HOST_GPUS and in
// NVIDIA_VISIBLE_DEVICES (as NVIDIA's container toolkit leaves it), for
// tools that address the host's GPUs (nvidia-smi -i, DCGM). All empty
// without GPUs: CUDA then sees none.
std::map<std::string, std::string> gpu_env(std::vector<int> host_gpus);

// The environment of a container: `base` (edt's PATH, PYTHONPATH), then
// edt's own variables, gpu_env(), the framework's (DeepSpeed:
// PDSH_RCMD_TYPE=ssh, WCOLL, OMPI_ALLOW_RUN_AS_ROOT*; Megatron-LM: MASTER_ADDR, MASTER_PORT, NODE_RANK,
// GPUS_PER_NODE, CUDA_DEVICE_MAX_CONNECTIONS=1), then the spec's env.
std::map<std::string, std::string> container_env(const ClusterSpec& spec, const ContainerStatus& container,
                                                 const std::map<std::string, std::string>& base);

}  // namespace edt::control
