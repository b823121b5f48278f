// What edtd's Slurm backend says to Slurm and reads back, apart from
// running anything: the sbatch command of a container, squeue's lines, the
// job file a node reads, the GPUs Slurm gave a job; and the shared
// directory's parents, which the containers must pass through. Pure
// functions but the last two (the file system only), tested without Slurm
// (slurm_jobs_test.cc).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/backends/backend.h"
#include "control/backends/local/local_backend.h"

namespace edt::control::slurm_jobs {

// Where the containers go, from edtd's --slurm-* flags.
struct Placement {
  std::string partition;
  std::string account;  // "": Slurm's default for the user
  std::string qos;      // "": Slurm's default
  // A container without a memory bound asks for its shm and this much more.
  uint64_t default_memory_bytes = uint64_t{1} << 30;
};

// A Slurm job as squeue shows it.
struct Job {
  int64_t id = 0;
  std::string name;     // edt-<key>-<container>
  std::string state;    // PENDING, RUNNING, CANCELLED, NODE_FAIL, ...
  std::string node;     // "" while pending
  std::string reason;   // squeue's %r: Resources, Priority, None, ...
  std::string cluster;  // its comment: the edt cluster
};

// squeue's format for parse_squeue.
inline constexpr const char* kSqueueFormat = "%i|%j|%T|%N|%r|%k";
// Lines "id|name|state|node|reason|comment"; others are skipped.
std::vector<Job> parse_squeue(const std::string& text);

// Whether a job in `state` is over (its container gone; a COMPLETING job
// is not yet).
bool ended(const std::string& state);
// Whether it waits to be placed.
bool waiting(const std::string& state);

// "edt-<key>-<container>": the job names of one edtd (key: its data dir's).
std::string job_name(const std::string& key, const std::string& container);
// The container of a job name of `key`'s, or "" if it is not one.
std::string container_of(const std::string& key, const std::string& job_name);

// The sbatch command that places container `spec`: one task on one node,
// its CPUs, memory and GPUs (as GRES gpu:MODEL:N) from the spec; its
// output in `output`; it runs `node_command` (exec'd, so Slurm's signals
// reach it).
std::vector<std::string> sbatch_argv(const SandboxSpec& spec, const Placement& placement, const std::string& key,
                                     const std::string& output, const std::string& node_command);
// The job id in sbatch --parsable's output ("42" or "42;cluster"), or 0.
int64_t parse_job_id(const std::string& text);

// The GPUs Slurm gave the job: SLURM_JOB_GPUS (their places in gres.conf),
// "0,2" -> {0, 2}; nullopt if it says something else.
std::optional<std::vector<int>> parse_gpu_list(const std::string& text);

// The GRES GPUs of sinfo -h -N -o '%N|%G' (a node's line once per
// partition it is in: counted once), by model: "gpu:NVIDIA-P4:2(S:0)" on a
// node adds 2 of NVIDIA-P4. A GPU without a type is "gpu".
std::map<std::string, int> parse_gres_inventory(const std::string& text);

// What a node's helper reads (slurm_node.h): the container and the
// backend options it starts it with.
// --slurm-mode user: a container's slot, its address in edtd's store
// ("0.0.x.y", never an address on a network), is its sshd's port in its
// low 16 bits, x * 256 + y; 0 for text of another form.
int slot_port(const std::string& slot);
// The `NodeAddr` of `scontrol -o show node` output, or "".
std::string parse_node_address(const std::string& text);

nlohmann::json job_file(const SandboxSpec& spec, const LocalBackendOptions& node);
Result<std::pair<SandboxSpec, LocalBackendOptions>> read_job_file(const nlohmann::json& j);

// The shared directory `dir` and its parents, as the containers' root (an
// unprivileged id on the nodes, with user namespaces) passes through them
// to what bwrap binds: it enters each as "others". make_passable_parents()
// makes the missing ones with mode 0711 (pass, not list), whatever the
// umask; unpassable_parent() names the first that others may not enter,
// with its mode ("/tmp/a (mode 0700)"), or "" when there is none.
Status make_passable_parents(const std::string& dir);
std::string unpassable_parent(const std::string& dir);

}  // namespace edt::control::slurm_jobs
