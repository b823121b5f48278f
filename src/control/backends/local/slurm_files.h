// A Slurm cluster's part of a local container (SandboxSpec::slurm): the
// files on the host, what bubblewrap binds of them, and the daemons the
// sandbox starts before sshd.
//
// Per cluster, under clusters/<cluster>/: slurm/ (slurm.conf,
// slurm-daemons.conf, cgroup.conf, an empty gres.conf where each
// container's own is bound), munge/munge.key (made once, readable by the
// containers' root only, bound into this cluster's containers alone), and
// on the launcher slurmctld/ (slurmctld's state, so a launcher that
// restarts finds its jobs again). Per container: conf/gres.conf.
//
// The cluster's files are shared by its containers: the caller serialises
// write_cluster_slurm_files() for one cluster (LocalBackend's
// cluster_files_mu_). Errors are kIoError naming the file.
#pragma once

#include <string>
#include <vector>

#include "control/backends/backend.h"

namespace edt::control {

// The container's own gres.conf, in `dir`/conf.
Status write_container_slurm_files(const SandboxSpec& spec, const std::string& dir);

// The cluster's files in `cluster_dir` (clusters/<cluster>), as
// spec.slurm gives them; the munge key only if there is none yet.
Status write_cluster_slurm_files(const SandboxSpec& spec, const std::string& cluster_dir);

// bubblewrap's binds of the Slurm files into container `dir`.
std::vector<std::string> slurm_binds(const SandboxSpec& spec, const std::string& dir, const std::string& cluster_dir);

// The command that starts munged, slurmctld (the launcher) and slurmd,
// registers the node at its own address, and in the launcher removes from
// Slurm the nodes whose containers left the hostfile; then execs what
// follows it (sshd).
std::vector<std::string> slurm_init_command(const SandboxSpec& spec);

}  // namespace edt::control
