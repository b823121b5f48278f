// `edtd slurm-node JOBFILE`: a container's Slurm job on its compute node
// (slurm_backend.h). It reads the job file the login node wrote, takes the
// GPUs Slurm gave the job (SLURM_JOB_GPUS), starts the container with the
// local backend's sandbox on a macvlan of the node's interface, and stays
// until the sandbox ends:
//   - it writes <shared>/slurm/jobs/<job id> ("<sandbox pid> <container>")
//     once the sandbox runs (for exec through srun), and <id>.workers, the
//     number of edtrun workers in it, whenever that changes (for a drain);
//   - SIGTERM (scancel --batch --signal=TERM, or Slurm ending the job) is
//     passed to every process of the container;
//   - it is the subreaper of what it starts, so the sandbox stays in the
//     job's process tree and Slurm's end of the job reaches it too;
//   - it keeps the container's filter to its cluster's addresses
//     (container_network.h, macvlan mode);
//   - every 5 s it asks Slurm (squeue) whether the job still runs, and ends
//     the container when Slurm says it ended: a node declared failed while
//     it lives on (its slurmd gone) stops holding the address that the
//     container's new job elsewhere takes.
// Its exit status: 0 when the container ended, 1 if it could not start it
// (the reason on stderr, in the job's output).
#pragma once

namespace edt::control {

inline constexpr const char* kSlurmNodeCommand = "slurm-node";

int slurm_node_main(int argc, char** argv);

}  // namespace edt::control
