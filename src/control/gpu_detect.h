// The GPUs edtd offers, where no --gpus declares simulated ones: this
// machine's, as nvidia-smi lists them, or with --backend slurm the GRES of
// the partition's nodes. Each is {index, model ("NVIDIA-P4": spaces as
// '-'), simulated = false}. Called from main's thread at start.
#pragma once

#include <string>
#include <vector>

#include "control/model/catalog.h"
#include "edt/status.h"

namespace edt::control {

// The GPUs nvidia-smi reports; none if it is missing or fails.
std::vector<Gpu> detect_gpus();

// The GPUs of the Slurm partition, as GRES: edtd counts them so a cluster
// never asks for more than the partition has; Slurm says which a job gets.
Result<std::vector<Gpu>> slurm_gpus(const std::string& partition);

}  // namespace edt::control
