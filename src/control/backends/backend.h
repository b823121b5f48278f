// Backend: where containers run. One narrow interface so the reconcile loop
// does not care whether a container is a local sandbox, a pod or a Slurm
// step: start one detached, observe it, signal it, remove what it left,
// write the cluster's shared files (hosts, hostfile) into all of its
// containers, and run a command in one.
//
// Containers outlive edtd: start() returns a SandboxRef (a process identity,
// common/process.h) that edtd stores, and a restarted edtd observes the same
// sandbox through it. Each sandbox also carries a label naming the backend
// instance (its data dir), the cluster and the container, so that one whose
// start was cut short by a crash, before its ref was stored, is still found
// (running_sandboxes) and then adopted or ended (end_sandboxes_except).
// Calls are made from
// the reconcile loop's one thread; exec() may come from API threads too.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/model/cluster.h"
#include "control/model/error.h"
#include "control/model/image_user.h"
#include "edt/status.h"

namespace edt::control {

struct SandboxMount {
  std::string host_path;
  std::string path;  // inside the container
  bool read_only = false;
};

// Slurm in a container of a slurm cluster (control/model/slurm.h): the
// cluster's /etc/slurm and munge key, and its daemons, started before sshd.
struct SandboxSlurm {
  std::string slurm_conf;   // /etc/slurm/slurm.conf, the same in every container of the cluster
  std::string daemons_conf; // /etc/slurm/slurm-daemons.conf, likewise
  std::string cgroup_conf;  // /etc/slurm/cgroup.conf
  std::string gres_conf;    // /etc/slurm/gres.conf, this container's own
  std::string node_conf;    // slurmd -Z --conf
  bool controller = false;  // slurmctld runs here too
};

struct SandboxSpec {
  std::string cluster;
  std::string name;  // its hostname too
  std::string address;
  std::string image_root;  // "/" for the host's file system
  uint64_t shm_bytes = 0;
  uint64_t memory_bytes = 0;  // its processes and /dev/shm together; 0: no bound
  int64_t cpu_millis = 0;     // CPU time, thousandths of a CPU; 0: no bound
  std::vector<SandboxMount> mounts;
  std::map<std::string, std::string> env;  // every session and job in it sees these
  bool job_dir = false;                     // DeepSpeed: the hostfile also at /job/hostfile
  // Its GPUs (the host's indices): /dev/nvidia<i> in it, the host's device
  // where there is one, else a stand-in character device (/dev/null's).
  std::vector<int> gpus;
  std::string gpu_model;  // the cluster's GPU model, as a backend that places containers asks for it
  std::optional<SandboxSlurm> slurm;
  // The number of its owner's subordinate uid/gid range (Catalog::
  // user_ranges), which a backend with user namespaces maps the container's
  // ids to; 0: the owner has none.
  int64_t id_range = 0;
  // Runs as the starting process's own user and group, mapped to
  // themselves in a user namespace bubblewrap makes (no other id exists in
  // it, no capability), on the host's network, its sshd on the backend's
  // port on every address: a Slurm job's container with --slurm-mode user
  // (docs/slurm.md). false: as the local backend runs it (its root).
  bool own_user = false;
  // The image's User (its config's field, "" for root): whom its sessions,
  // jobs and notebooks run as, unless it runs as its own user.
  std::string image_user;
  // image_user resolved in the image's /etc/passwd and /etc/group, by the
  // backend that starts it (LocalBackend::start); root until then.
  ContainerUser login;
};

enum class SandboxState {
  kGone,      // not running (never started, exited, or killed)
  kQueued,    // waiting for its engine to place it (a pending Slurm job); no start timeout runs
  kStarting,  // running, not yet accepting SSH
  kReady,     // running and accepting SSH on its address
};

// Where a sandbox runs, as its engine says; empty for a backend with one
// machine and no engine of its own (local).
struct SandboxPlacement {
  std::string node;    // the machine it runs on; "" while queued
  int64_t job = 0;     // the engine's id for it (a Slurm job id); 0: none
  std::string reason;  // queued: why it waits ("Resources"); gone: how it ended ("CANCELLED")
};

// Where this host reaches a container's sshd, and whom it logs in as.
struct SshEndpoint {
  std::string address;
  int port = 0;
  std::string user;
  // The container shares its node's network and addresses (Slurm's
  // --slurm-mode user): a server of its own takes a port free there.
  bool node_network = false;
};

// The files every container of a cluster sees under /etc/mpi.
struct ClusterFiles {
  std::string hosts;     // /etc/hosts
  std::string hostfile;  // /etc/mpi/hostfile
  std::string discover;  // lines "name:slots" that /etc/mpi/discover_hosts.sh prints
  std::string hostnames;  // /etc/mpi/hostnames: the hostfile's names alone, one a line (pdsh -w ^FILE, WCOLL)
};

// A sandbox found by its label, whether or not the store holds its ref.
struct FoundSandbox {
  std::string cluster;
  std::string name;  // the container's
  SandboxRef ref;    // as start() returns it
};

struct ExecSpec {
  std::string container;  // its name: the command runs as its login user (Backend::ssh_endpoint's)
  std::string command;  // run with /bin/bash -c
  std::string log_path;   // stdout and stderr, on the host
  std::string exit_path;  // the exit code is written here when it ends
  std::map<std::string, std::string> env;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Makes the cluster's shared directory and SSH keys; idempotent.
  virtual Status prepare_cluster(const std::string& cluster) = 0;
  // Starts a container, detached from edtd. Fails without leaving anything.
  // The reconciler starts the containers of a scale at once, from several
  // threads.
  virtual Result<SandboxRef> start(const SandboxSpec& spec) = 0;
  virtual SandboxState observe(const std::string& name, const SandboxRef& ref) = 0;
  // Its node, engine job and the engine's reason, as of the last observe().
  virtual SandboxPlacement placement(const SandboxRef& /*ref*/) { return {}; }
  // SIGTERM reaches every process of the container; SIGKILL ends it.
  virtual Status signal(const SandboxRef& ref, int signal) = 0;
  // How many processes in the container are workers of a training job:
  // those whose environment has EDT_COORDINATOR, which edtrun gives every
  // worker it starts, however it starts it (directly, over ssh, or through
  // a small client that a warm process forks the worker for). A container
  // leaving on scale-down is stopped once this is 0 (its drain). 0 for a
  // container that is gone.
  virtual Result<int> training_processes(const SandboxRef& ref) = 0;
  // The labelled sandboxes of this backend that run now, found without the
  // store. Which container each is comes from what the backend itself made
  // and recorded (LocalBackend: the sandbox's cgroup and edtd's record),
  // never from the label, which the container may rewrite; a labelled
  // sandbox it cannot tell is left out (and so ended as a stray). A backend
  // whose containers cannot outlive edtd has none.
  virtual Result<std::vector<FoundSandbox>> running_sandboxes() { return std::vector<FoundSandbox>{}; }
  // Ends every labelled sandbox not in `keep`, and every process of its
  // label that made no sandbox yet (a start cut short), and waits until they
  // are gone, so their addresses and ports are free again. Returns how many
  // processes it ended.
  virtual Result<int> end_sandboxes_except(const std::vector<SandboxRef>& /*keep*/) { return 0; }
  // Removes a container's files; call once it is gone.
  virtual Status remove(const std::string& name) = 0;
  // Writes the shared files atomically (write, then rename).
  virtual Status write_cluster_files(const std::string& cluster, const ClusterFiles& files) = 0;
  // Removes the cluster's shared directory and keys.
  virtual Status remove_cluster(const std::string& cluster) = 0;
  // Runs a command in a running container, detached from edtd; returns the
  // host-side process that waits for it.
  virtual Result<SandboxRef> exec(const SandboxRef& container, const ExecSpec& spec) = 0;
  // The private key that logs in to the cluster's containers.
  virtual Result<std::string> ssh_private_key(const std::string& cluster) = 0;
  // A known_hosts file that holds the cluster's containers' host keys (for
  // ssh's UserKnownHostsFile, with StrictHostKeyChecking yes). A backend
  // whose containers have no SSH host keys to check has none.
  virtual Result<std::string> ssh_known_hosts(const std::string& /*cluster*/) {
    return not_found("this backend knows no SSH host keys");
  }
  virtual int ssh_port() const = 0;
  // Whether this backend can run a cluster of `spec`: a refusal (field,
  // message, fix; control/model/error.h) when it cannot.
  virtual Status accepts(const ClusterSpec& /*spec*/) const { return Status::ok(); }
  // Container `name`'s sshd, whose address in the store is `address`: there,
  // at ssh_port(), as root, unless the backend places it otherwise or its
  // image names another User.
  virtual SshEndpoint ssh_endpoint(const std::string& /*name*/, const std::string& address) {
    return {address, ssh_port(), "root", false};
  }
  // The address users reach container `c` at, which the API shows: the
  // store's, unless the backend places it otherwise.
  virtual std::string shown_address(const ContainerStatus& c) { return c.address; }
};

}  // namespace edt::control
