// SlurmBackend: edtd on a login node of an existing Slurm cluster places
// each container as a Slurm job of its own (edtd --backend slurm).
//
// What runs where:
//   login node (edtd): sbatch one job per container (one task on one node:
//     the container's CPUs, memory and GPUs as GRES gpu:MODEL:N, in the
//     partition, account and QoS of the flags), squeue to observe them,
//     scancel to signal and end them, srun --overlap to run a command in
//     one (exec).
//   compute node (the job): `edtd slurm-node JOBFILE` (slurm_node.h) starts
//     the container there as the local backend does, the same sandbox, in
//     a network namespace whose eth0 is a macvlan of the node's interface
//     with the container's own address on the nodes' network; the GPUs are
//     those Slurm gave the job. It stays in the job until the sandbox ends,
//     passes SIGTERM on, and tells edtd the sandbox's pid and its number of
//     edtrun workers through files.
//   shared directory (--slurm-shared-dir, on a file system every node and
//     the login node mount at the same path): what the local backend keeps
//     in its data dir for containers (clusters/<c>/mpi, keys, containers/),
//     and slurm/: the job files, the jobs' output, and jobs/<id> (the
//     sandbox's pid) and jobs/<id>.workers, written by the nodes.
//
// The files of a cluster (hostfile, keys, its containers' own) are made and
// removed on the login node by the local backend's code, over the shared
// directory; only start, observe, signal, exec and the worker count go
// through Slurm.
//
// --slurm-mode user (SlurmBackendOptions::own_user): edtd runs as the
// site's service account and so do its jobs; on the node the sandbox runs
// as that account (SandboxSpec::own_user: a user namespace bubblewrap
// makes, mapping it alone) on the node's network, its sshd on the port of
// the container's slot (its address in the store: slurm_jobs.h slot_port).
// write_cluster_files() puts each container at its node's address (Slurm's
// NodeAddr) in /etc/hosts and its port in mpi/ssh_config; ssh_endpoint()
// gives edtd's terminals, Jupyter and `edt ssh` the same.
//
// Names: each job is `edt-<key>-<container>` (key: a hash of the shared
// directory), its comment the cluster, so running_sandboxes() finds this
// edtd's jobs after a restart, whether or not the store has their ids.
//
// observe() asks squeue at most every 250 ms for all of this user's jobs
// (--me, with those that ended within Slurm's MinJobAge), and answers from
// that; placement() gives the job's node, id and state or pending reason.
#pragma once

#include <chrono>
#include <map>
#include <mutex>

#include "control/backends/local/local_backend.h"
#include "control/backends/slurm/slurm_jobs.h"

namespace edt::control {

struct SlurmBackendOptions {
  slurm_jobs::Placement placement;
  std::string node_program;  // edtd, at the same path on every node
  // The nodes' interface that containers' macvlans hang off, and the
  // default gateway of the nodes' network for containers ("": on-link).
  std::string interface;
  std::string gateway;
  int prefix = 24;  // of the containers' addresses on the nodes' network
  // This host's address on the nodes' network: the one address besides a
  // cluster's own containers that may connect to them (container_network.h).
  std::string login_address;
  std::string range;  // the containers' block (--address-range), a.b.c.d/len
  // --slurm-mode user: each container runs as edtd's own user on its
  // node's network, its sshd on the port of its slot (slurm_jobs.h:
  // slot_port); no macvlan, no filter (interface, gateway, prefix,
  // login_address and range unused).
  bool own_user = false;
};

class SlurmBackend : public LocalBackend {
 public:
  // `files`: the local backend's options over the shared directory (its
  // data_dir), as the nodes start sandboxes with them.
  SlurmBackend(LocalBackendOptions files, SlurmBackendOptions options);

  // Also its directory passable (0711) whatever edtd's umask.
  Status prepare_cluster(const std::string& cluster) override;
  Result<SandboxRef> start(const SandboxSpec& spec) override;
  SandboxState observe(const std::string& name, const SandboxRef& ref) override;
  SandboxPlacement placement(const SandboxRef& ref) override;
  Status signal(const SandboxRef& ref, int signal) override;
  Result<int> training_processes(const SandboxRef& ref) override;
  Result<std::vector<FoundSandbox>> running_sandboxes() override;
  Result<int> end_sandboxes_except(const std::vector<SandboxRef>& keep) override;
  // Also its job file and the job's output.
  Status remove(const std::string& name) override;
  // --slurm-mode user: each name at its node's address, and mpi/ssh_config
  // with each container's port; those without a running job left out.
  Status write_cluster_files(const std::string& cluster, const ClusterFiles& files) override;
  // --slurm-mode user: no cluster of framework slurm (its daemons need root).
  Status accepts(const ClusterSpec& spec) const override;
  // --slurm-mode user: its node's address, its slot's port, edtd's user.
  SshEndpoint ssh_endpoint(const std::string& name, const std::string& address) override;
  // --slurm-mode user: its node's address ("" before it has a node), not
  // its slot in the store.
  std::string shown_address(const ContainerStatus& c) override;

  // The GPUs of the partition's nodes, by model, from sinfo; an error
  // naming the partition when Slurm does not know it.
  static Result<std::map<std::string, int>> partition_gpus(const std::string& partition);
  // This host's source address toward `address` (ip route get): the login
  // address its containers let in.
  static Result<std::string> source_address_toward(const std::string& address);

 protected:
  Result<std::vector<std::string>> enter_command(const SandboxRef& container) override;

 private:
  std::string slurm_dir() const;  // <shared>/slurm
  std::string job_path(int64_t job) const;
  // squeue's jobs of this edtd by id, at most 250 ms old.
  Result<std::map<int64_t, slurm_jobs::Job>> jobs(bool fresh = false);
  // The next jobs() asks squeue again (after a change edtd made).
  void forget_jobs();
  // --slurm-mode user: the address of the node that runs container `name`
  // (Slurm's NodeAddr, resolved), "" while none does.
  std::string node_address_of(const std::string& name);
  Result<std::string> node_address(const std::string& node);

  SlurmBackendOptions options_;
  std::string key_;
  std::mutex mu_;
  std::map<int64_t, slurm_jobs::Job> jobs_;  // under mu_
  std::chrono::steady_clock::time_point jobs_at_{};  // under mu_
  std::map<std::string, std::string> node_addresses_;  // under mu_: node -> address
  std::string user_;  // edtd's own user's name
};

}  // namespace edt::control
