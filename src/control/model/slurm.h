// Slurm inside a cluster of type slurm: the files and the daemon options
// edtd derives from the cluster's spec and its containers.
//
// Every container runs munged (the cluster's own key) and slurmd; the
// launcher also runs slurmctld. Nodes are Slurm's dynamic nodes (slurmd
// -Z): a container registers itself with its CPUs, memory and GPUs when it
// starts, and leaves with `scontrol delete`; slurm.conf names no node, so it
// is the same file for the cluster's whole life and a scale needs no
// `scontrol reconfigure`.
//
// In loopback mode all containers share the host's network namespace, so
// the daemons cannot all listen on every address: they read
// slurm-daemons.conf, which adds CommunicationParameters=NoInAddrAny,
// NoCtldInAddrAny, and each binds its own container's address (its
// hostname, which /etc/hosts resolves); so all of them, of every cluster,
// use the same two ports. Commands (srun, sbatch, scontrol...) read
// slurm.conf, without it: they listen on every address, since Slurm
// answers them at the address their requests came from, which in a shared
// namespace is 127.0.0.1, not the container's. For the same
// reason a dynamic node registers with 127.0.0.1 as its address, and the
// container corrects it (scontrol update NodeAddr=) before it is Running.
//
// Pure functions; no I/O.
#pragma once

#include <string>
#include <vector>

#include "control/model/cluster.h"

namespace edt::control::slurm {

inline constexpr int kControllerPort = 6817;
inline constexpr int kNodePort = 6818;

// /etc/slurm/slurm.conf (daemons false) or /etc/slurm/slurm-daemons.conf
// (true), the same in every container of the cluster.
std::string render_slurm_conf(const ClusterSpec& spec, const std::string& controller_address, bool daemons);

// /etc/slurm/cgroup.conf: no cgroup plugin touches the container's
// cgroups (proctrack/linuxproc, task/none), but slurmd reads this file and
// refuses the host's hybrid cgroup layout without it.
std::string render_cgroup_conf();

// /etc/slurm/gres.conf of one container: its GPUs, as the character
// devices /dev/nvidia<i> the sandbox provides (i: the host's index).
std::string render_gres_conf(const ClusterSpec& spec, const std::vector<int>& gpus);

// What `slurmd -Z --conf` declares of a container: its GPUs as GRES and,
// when the cluster bounds memory, that bound (MiB). Its CPUs are what
// slurmd finds.
std::string node_conf(const ClusterSpec& spec, const std::vector<int>& gpus);

// The GRES type for a GPU model: Slurm's type names are single words, so
// anything but letters, digits, '-' and '_' becomes '_'.
std::string gres_type(const std::string& model);

}  // namespace edt::control::slurm
