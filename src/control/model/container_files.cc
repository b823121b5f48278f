#include "control/model/container_files.h"

#include <algorithm>

namespace edt::control {

std::map<std::string, std::string> gpu_env(std::vector<int> host_gpus) {
  // CUDA orders the devices it can open by PCI bus (one model per
  // container), which is the order of the driver's minor numbers.
  std::sort(host_gpus.begin(), host_gpus.end());
  std::string cuda, host;
  for (size_t i = 0; i < host_gpus.size(); ++i) {
    cuda += (i ? "," : "") + std::to_string(i);
    host += (i ? "," : "") + std::to_string(host_gpus[i]);
  }
  return {{"CUDA_VISIBLE_DEVICES", cuda}, {"EDT_HOST_GPUS", host}, {"NVIDIA_VISIBLE_DEVICES", host}};
}

std::map<std::string, std::string> container_env(const ClusterSpec& spec, const ContainerStatus& container,
                                                 const std::map<std::string, std::string>& base) {
  std::map<std::string, std::string> env = base;
  env["HOME"] = "/root";
  env["USER"] = "root";
  env["EDT_CLUSTER"] = spec.name;
  env["EDT_CONTAINER"] = container.name;
  env["EDT_FRAMEWORK"] = spec.framework;
  for (const auto& [key, value] : gpu_env(container.gpus)) env[key] = value;
  if (spec.framework == "deepspeed") {
    // DeepSpeed's launcher starts every node with pdsh; over ssh, as on
    // the sites it was written for (rsh is pdsh's own default).
    env["PDSH_RCMD_TYPE"] = "ssh";
    // A bare `pdsh CMD` runs on every container: pdsh's host list file
    // wants names alone, not the hostfile's "name slots=N".
    env["WCOLL"] = "/job/hostnames";
    // Its OpenMPI runner calls mpirun without --allow-run-as-root, and a
    // container's user is root.
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
  }
  if (spec.framework == "megatron") {
    // torchrun's arguments as Megatron-LM's example scripts name them. No
    // NNODES here: this environment is fixed when a container starts and
    // a scale would leave it wrong in the others; `edtrun --per-host`
    // gives it (and a free MASTER_PORT) from the hostfile of the moment.
    env["MASTER_ADDR"] = container_name(spec.name, 0);
    env["MASTER_PORT"] = "6000";
    env["NODE_RANK"] = std::to_string(container.index);
    env["GPUS_PER_NODE"] = std::to_string(container.gpus.empty() ? 1 : container.gpus.size());
    // Megatron-LM orders its overlapped communication and computation on
    // one CUDA stream connection; its scripts all set this.
    env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1";
  }
  for (const auto& [key, value] : spec.env) env[key] = value;
  return env;
}

std::vector<ContainerStatus> running_containers(const std::vector<ContainerStatus>& containers) {
  std::vector<ContainerStatus> running;
  for (const auto& c : containers)
    if (!c.leaving && c.phase == Phase::kRunning) running.push_back(c);
  return running;
}

std::string render_hostfile(const std::vector<ContainerStatus>& containers) {
  std::vector<const ContainerStatus*> sorted;
  for (const auto& c : containers) sorted.push_back(&c);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->index < b->index; });
  std::string out;
  for (const auto* c : sorted)
    out += c->name + " slots=" + std::to_string(c->gpus.empty() ? 1 : c->gpus.size()) + "\n";
  return out;
}

}  // namespace edt::control
