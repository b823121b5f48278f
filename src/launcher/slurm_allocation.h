// The hosts of a Slurm allocation, for edtrun run inside one (salloc -N 4
// edtrun -np 4 ..., or an sbatch script) without -H or --hostfile.
//
// Slurm gives the allocation's shell SLURM_JOB_NODELIST in its compact form
// ("tt-launcher,tt-worker-[0-2]") and SLURM_TASKS_PER_NODE ("2(x3),1": 2
// tasks on each of the first 3 nodes, then 1); each node becomes a host
// with that many slots. Pure functions of the environment given.
//
// expand_nodelist() is edt's one parser of the compact form: a task of
// srun without edtrun (python/edt/_slurm.py) calls it through the
// extension (_edt.expand_slurm_nodelist).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "edt/status.h"
#include "launcher/hostfile.h"
#include "launcher/worker_env.h"

namespace edt::launcher {

// The host names of a node list in Slurm's compact form, in order (what
// `scontrol show hostnames` prints). Errors name the list and the part.
Result<std::vector<std::string>> expand_nodelist(std::string_view nodelist);

// SLURM_TASKS_PER_NODE ("2(x3),1") as one count per node.
Result<std::vector<int>> expand_tasks_per_node(std::string_view tasks);

// Whether `env` is inside a Slurm allocation (SLURM_JOB_NODELIST is set).
bool in_slurm_allocation(const Environment& env);

// The allocation's hosts, each with its tasks as slots (1 per node when
// SLURM_TASKS_PER_NODE is absent).
Result<std::vector<HostSlots>> slurm_allocation_hosts(const Environment& env);

}  // namespace edt::launcher
