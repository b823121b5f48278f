// LocalBackend: each container a bubblewrap sandbox on this machine.
//
// The sandbox's root is assembled, not the host's root bound read-only
// (which would leave no place for new mount points): the image's /usr (with
// /bin, /lib... as on the image); an /etc of its own made of links to what
// any user may read of the image's /etc (bound at /run/host/etc with what is
// not world-readable masked), its own /etc/shadow (no passwords), plus
// /etc/hosts and /etc/mpi from the cluster's shared directory (bound
// read-only as a directory, so a write-then-rename there by edtd is seen at
// once in every container and no container can plant a link in it); its own
// writable /root, /tmp and /var (on one disk of bounded size and files,
// disk_quota.h); a /dev/shm tmpfs of the asked size; the volumes; then the
// root is remounted read-only. It has its own UTS
// (hostname), PID and IPC namespaces. Its network is one of two modes:
// loopback (the default), where it shares the host's network namespace and
// sshd listens on the container's own 127.x address; or bridge
// (LocalBackendOptions::network set), where it has a namespace of its own
// on edtd's bridge (container_network.h): bwrap holds the sandbox (its
// --block-fd) until edtd has given it its interface, so sshd never starts
// without its address. Either way the SSH client binds the container's
// address, so peers see connections from it. Every process in it runs
// under sandbox_policy.h's limits (capabilities, no_new_privs, seccomp) and
// in the container's cgroup (cgroups.h: its pids, memory and CPU bounds);
// exec() enters it through enter.h, under the same limits.
//
// User namespaces (LocalBackendOptions::first_subordinate_id): the sandbox's
// first process makes a user namespace, edtd maps its ids 0..65535 to the
// owner's subordinate range on the host, and bwrap runs inside it as that
// namespace's root: the container's root is an unprivileged uid on the
// host, with capabilities over its own namespaces only. The container's own
// directory (and the cluster's munge key, a managed volume's top) belong to
// that uid; what it only reads stays root's and world-readable. bwrap, as
// that uid, reaches its sources through the data dir, which is then 0711.
//
// Layout under the data dir:
//   clusters/<cluster>/mpi/      hosts, hostfile, discover_hosts.sh, known_hosts
//   clusters/<cluster>/ssh/      id_ed25519 (root's key pair), host_ca (the
//                                cluster's SSH host certificate authority)
//   etc-links/<key>/             a container's /etc: links into the image's /etc
//                                (what any user may read), mount points for its own
//   containers/<name>/           etc/ (its hostname, shadow), disk/ (root/, tmp/, var/: what it
//                                writes), conf/ (sshd_config, the container's host key and
//                                certificate), log, masked/ and masked-file (what hides the
//                                image's secrets)
//   containers/<name>.disk       the disk mounted at containers/<name>/disk, with a disk bound
//   seccomp.bpf                  the containers' filter, as bwrap and the warm
//                                interpreter read it
//   warm/                        the warm interpreter's socket and log; bound
//                                read-only at /run/edt-warm in containers
//
// SSH host keys: each container has a host key of its own, signed by the
// cluster's CA as a host certificate for its name and address; the clients
// in the containers check it against mpi/known_hosts (at
// /etc/mpi/known_hosts), one `@cert-authority *` line, with
// StrictHostKeyChecking yes. The file does not change as the cluster scales.
//
// The label: bwrap runs with EDT_SANDBOX_HOME (the data dir, absolute),
// EDT_SANDBOX_CLUSTER and EDT_SANDBOX_CONTAINER in its environment, and so
// does the sandbox's init, bwrap's own child (/proc/<pid>/environ shows
// them). sshd inherits them too but makes itself unreadable, and a session
// gets sshd's fresh environment: a user's processes carry none.
// running_sandboxes() finds the candidate inits of this data dir's
// sandboxes by it, and end_sandboxes_except() its strays; nothing more.
//
// What edtd believes about a sandbox comes from outside it. The init's
// environment is memory that container root may rewrite (it may ptrace
// its own init: /proc/1/mem), so the label never says which container a
// sandbox is. running_sandboxes() takes that from
//   - the kernel: the cgroup the sandbox's first process joined before it
//     ran bwrap (/proc/<pid>/cgroup ends in edt-<key>/<container>), which
//     no process in it can leave (/sys is read-only there, mounts and
//     cgroup namespaces refused); and
//   - edtd's record, containers/<name>/sandbox.json: the cluster and the
//     container, written before the sandbox is spawned, then with its
//     init's pid and start time once bwrap names it. The container's
//     directory itself is bound nowhere into it; the file is edtd's (its
//     owner is checked) and is never read through a link.
// identify_sandbox() decides. Where containers get no cgroup (no bound, or
// none edtd may write), the record alone: a sandbox spawned by an edtd that
// died before writing its pid is then ended as a stray and started again,
// not adopted.
//
// The log. The sandbox's stdout and stderr (bwrap's, its init's, sshd -e's)
// are a pipe to a log writer of its own (container_log.h: edtd
// container-log, started detached, as nobody), which keeps
// containers/<name>/log under 1 MiB with one rotated log.1, and writes
// `ready` once sshd listens. So the init, which container root may trace,
// holds no host file open, only that pipe; observe() is a stat of `ready`;
// a failed start quotes the log's last 4 KiB.
//
// The pieces, one file each: sandbox_process.h (spawning, namespaces),
// proc_scan.h (the label, /proc), sandbox_record.h (the record, which
// container a sandbox is), container_fs.h (the container's tree and /etc),
// bwrap_args.h (bubblewrap's arguments), slurm_files.h (a Slurm cluster's
// files and daemons). This class joins them.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/backends/backend.h"
#include "control/backends/local/cgroups.h"
#include "control/backends/local/container_network.h"
#include "control/backends/local/disk_quota.h"
#include "control/backends/local/tool_bundle.h"
#include "control/backends/local/warm_interpreter.h"

namespace edt::control {

struct Pipe;  // sandbox_process.h

struct LocalBackendOptions {
  std::string data_dir;
  int ssh_port = 2222;
  // edt's build or install tree and the venv, bound read-only (edtd_flags.h,
  // Layout), entries put in front of PATH, and PYTHONPATH.
  std::vector<SandboxMount> tool_binds;
  std::vector<std::string> tool_path;
  std::string python_path;
  // The warm Python interpreter for joining workers (warm_interpreter.h).
  WarmInterpreterOptions warm;
  // The program that runs a command in a container, whose main() hands
  // `enter-container` to enter_container_main() (enter.h); empty: this
  // process's own program (edtd).
  std::string enter_program;
  // Bridge mode: each container in a network namespace of its own on this
  // bridge (container_network.h), or on a macvlan of a Slurm node's
  // interface (its `parent`); nullopt: the host's namespace (loopback).
  std::optional<ContainerNetworkOptions> network;
  // Every container's bound on tasks (cgroups.h); 0: none. Where this
  // machine has no pids cgroup edtd may write, it is dropped with a warning.
  int64_t pids_max = 0;
  std::string cgroup_root = "/sys/fs/cgroup";
  // User namespaces (0: none, container root is the host's root): a
  // container's uids and gids 0..65535 are the host's
  // first_subordinate_id + 65536 * (range - 1) + 0..65535, for its owner's
  // range (SandboxSpec::id_range). A multiple of 65536.
  uint32_t first_subordinate_id = 0;
  // Each container's writable dirs (/root, /tmp, /var) together: a disk of
  // their own (disk_quota.h), containers/<name>.disk mounted at
  // containers/<name>/disk; bytes 0: plain directories, no bound. Where
  // this machine cannot make such disks, it is dropped with a warning.
  DiskBound container_disk;
};

// The data dir's mode: 0711 with user namespaces, where bwrap, as the
// container's root, passes through it (and its containers/, clusters/,
// volumes/) to what it binds; 0700 without. edtd sets it before anything
// else, so a sandbox an earlier edtd started, still binding, never meets it
// narrowed (it is adopted).
inline int data_dir_mode(uint32_t first_subordinate_id) { return first_subordinate_id != 0 ? 0711 : 0700; }

class LocalBackend : public Backend {
 public:
  explicit LocalBackend(LocalBackendOptions options);

  Status prepare_cluster(const std::string& cluster) override;
  Result<SandboxRef> start(const SandboxSpec& spec) override;
  SandboxState observe(const std::string& name, const SandboxRef& ref) override;
  Status signal(const SandboxRef& ref, int signal) override;
  Result<int> training_processes(const SandboxRef& ref) override;
  Result<std::vector<FoundSandbox>> running_sandboxes() override;
  Result<int> end_sandboxes_except(const std::vector<SandboxRef>& keep) override;
  Status remove(const std::string& name) override;
  Status write_cluster_files(const std::string& cluster, const ClusterFiles& files) override;
  Status remove_cluster(const std::string& cluster) override;
  Result<SandboxRef> exec(const SandboxRef& container, const ExecSpec& spec) override;
  // As the login user its image names (container_fs.h, read_login).
  SshEndpoint ssh_endpoint(const std::string& name, const std::string& address) override;
  Result<std::string> ssh_private_key(const std::string& cluster) override;
  Result<std::string> ssh_known_hosts(const std::string& cluster) override;
  int ssh_port() const override { return options_.ssh_port; }

  // The PATH every container gets: `tool_path`, then the usual directories.
  static std::string container_path(const std::vector<std::string>& tool_path);
  // Starts the warm Python interpreter unless it runs (or is turned off).
  void keep_warm() { warm_.keep(); }

 protected:
  // The command that runs what follows it (`-- argv...`) in a running
  // container: edtd's enter-container with the sandbox's init.
  virtual Result<std::vector<std::string>> enter_command(const SandboxRef& container);
  std::string container_dir(const std::string& name) const;
  // Whether the sandbox whose directory is `dir` is ready: its log writer
  // saw sshd listen (one stat; a bounded read for a sandbox from before it).
  static bool sandbox_ready(const std::string& dir);
  const LocalBackendOptions& options() const { return options_; }
  const std::string& home() const { return home_; }

 private:
  std::string cluster_dir(const std::string& cluster) const;
  std::string seccomp_path() const;  // the filter, as bwrap reads it
  Status make_container_dir(const SandboxSpec& spec, const std::string& dir);
  // The container's writable dirs' disk, mounted at `dir`/disk (a plain
  // directory without a bound); start() released any an earlier one left.
  Status make_container_disk(const SandboxSpec& spec, const std::string& dir);
  std::string disk_image(const std::string& name) const;  // containers/<name>.disk
  // Unmounts and removes the container's disk, if any: before its directory goes.
  Status release_container_disk(const std::string& name);
  // A slurm cluster's /etc/slurm and munge key, and the container's gres.conf.
  Status write_slurm_files(const SandboxSpec& spec, const std::string& dir);
  // The container's host key in `conf`, and its certificate from the cluster's CA.
  Status make_host_key(const SandboxSpec& spec, const std::string& conf);
  // What the container binds besides its own files and its cluster's: the
  // tool tree (read-only, at the same paths), then the cluster's volumes.
  std::vector<SandboxMount> shared_binds(const SandboxSpec& spec) const;
  // edt's OpenSSH for the container: an image other than the host's.
  std::optional<ToolBundle> tools_for(const SandboxSpec& spec) const;
  // With user namespaces: the host's first id of the container's namespace
  // (its root), to which its own files, its cluster's munge key and the top
  // of a managed volume it mounts now belong; 0 without.
  Result<uint32_t> hand_over_to_container(const SandboxSpec& spec, const std::string& dir);
  // start()'s steps, in `dir` (made clean): the container's files, its
  // record and cgroups, its log writer, then bwrap; await_init() waits for
  // bwrap to name the sandbox's init.
  Result<SandboxRef> start_in(const SandboxSpec& spec, const std::string& dir);
  Result<uint32_t> make_sandbox_files(const SandboxSpec& spec, const std::string& dir);
  // Starts the log writer of `dir`, reading `out` (whose read end it then
  // closes here), in `cgroups`: its identity.
  Result<SandboxRef> start_log_writer(const std::string& dir, Pipe& out, const std::vector<std::string>& cgroups);
  // bwrap writes the pid of the sandbox's init to its info fd once the
  // namespaces exist: records it, and in bridge mode attaches the network
  // and releases the sandbox (`release`). Kills `monitor` when bwrap fails,
  // quoting the log `writer` wrote; a sandbox that ended before its network
  // was attached fails with its own reason, not the network step's.
  Result<SandboxRef> await_init(const SandboxSpec& spec, const std::string& dir, int64_t monitor,
                                const SandboxRef& writer, int release);
  // Bridge mode: gives the sandbox `ref` its interface, then lets it go on
  // (a byte on `release`, bwrap's block fd). On failure await_init() kills
  // the sandbox.
  Status attach_network(const SandboxSpec& spec, const SandboxRef& ref, int release);

  LocalBackendOptions options_;
  std::string home_;  // the data dir, absolute: the label's EDT_SANDBOX_HOME
  WarmInterpreter warm_;
  Result<std::string> seccomp_;  // the filter (sandbox_policy.h), made once
  ContainerCgroups cgroups_;
  std::unique_ptr<ContainerNetwork> network_;
  // edt's OpenSSH for images other than the host's; nullopt where it could
  // not be made (their own sshd then).
  std::optional<ToolBundle> tools_;  // bridge mode only
  // The files a cluster's containers share (its slurm.conf, its munge key):
  // written by one of the containers starting at once.
  std::mutex cluster_files_mu_;
};

}  // namespace edt::control
