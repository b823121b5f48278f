// The environment each worker starts with.
//
// Every worker is told its place in the job three ways, so that edt, Horovod
// and torch.distributed programs all run unchanged:
//   EDT_RANK EDT_SIZE EDT_LOCAL_RANK EDT_LOCAL_SIZE EDT_CROSS_RANK
//   EDT_CROSS_SIZE EDT_HOSTNAME EDT_COORDINATOR
//   HOROVOD_RANK ... HOROVOD_HOSTNAME (the same values)
//   RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK (the host index)
//   MASTER_ADDR MASTER_PORT
// With `edtrun --per-host` (one worker per host, which is itself a launcher
// such as torchrun), also what torchrun's command line wants, named as
// Megatron-LM's scripts name it:
//   NNODES and NUM_NODES (the hosts of the job; Megatron-LM's older
//   scripts say the one, its newer the other) NODE_RANK (this host's index)
//   GPUS_PER_NODE (the slots this host had in the host list)
// OMP_NUM_THREADS is 1 unless the user set it (as torchrun does: N workers
// on one host should not each start a thread per core).
//
// A local worker inherits edtrun's whole environment. A remote worker gets
// the forwarded part of it (as horovodrun does): everything except what
// describes the launching host or login session (HOSTNAME, SSH_*, DISPLAY,
// PWD, CUDA_VISIBLE_DEVICES, ...), which the remote host has its own values
// for. -x VAR=VALUE (or -x VAR, taking edtrun's value) is passed to every
// worker, local or remote, and wins over the rest, except over the
// variables above that place the worker in the job.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "edt/status.h"
#include "launcher/placement.h"

namespace edt::launcher {

using Environment = std::map<std::string, std::string>;

// `environ` as a map.
Environment current_environment();

// `env` as execve takes it: NAME=VALUE entries.
std::vector<std::string> env_entries(const Environment& env);

// Where workers find the job's services; both are per worker host because
// the address that reaches the launching machine differs by host.
struct Rendezvous {
  std::string coordinator;  // EDT_COORDINATOR, "host:port" or "[v6]:port"
  std::string master_addr;  // torch.distributed's rank-0 address
  int master_port = 0;
};

// The variables that place `slot` in the job.
Environment placement_variables(const SlotInfo& slot, const Rendezvous& rendezvous);

// --per-host's NNODES, NODE_RANK and GPUS_PER_NODE for `slot`, whose host
// had node_slots[slot.host_index] slots.
Environment per_host_variables(const SlotInfo& slot, const std::vector<int>& node_slots);

// Whether `name` describes the launching host or session and so is not
// copied to other hosts.
bool is_host_specific(const std::string& name);

// Parses the -x values against edtrun's environment: "VAR=VALUE" or "VAR".
Result<Environment> parse_exports(const std::vector<std::string>& specs, const Environment& launcher_env);

struct WorkerEnvironmentInputs {
  const Environment* launcher_env = nullptr;  // edtrun's own environment
  const Environment* exports = nullptr;       // from -x
  bool remote = false;                        // forward only what is not host-specific
  const std::vector<int>* node_slots = nullptr;  // --per-host: each host's slots, by host index
};

// The full environment of the worker of `slot`.
Environment worker_environment(const SlotInfo& slot, const Rendezvous& rendezvous, const WorkerEnvironmentInputs& inputs);

}  // namespace edt::launcher
