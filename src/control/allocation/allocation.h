// Allocation policy: which addresses and GPUs new containers get. Pure
// functions of what is taken; the service calls them inside the transaction
// that reads what is taken and records what they pick, so two requests
// cannot pick the same address or GPU.
//
// Addresses come from a block (AddressRange), lowest free first; the
// block's first and last addresses are never given out. With loopback
// networking the block lies inside 127.0.0.0/8; with a bridge
// (container_network.h) it is any unicast block outside 127/8, and its
// second address is the bridge's (the gateway), not given out either.
// GPUs are whole devices of one model, lowest free index first, the same
// count for every container.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "control/model/catalog.h"
#include "control/model/error.h"
#include "edt/status.h"

namespace edt::control {

// How containers are networked: each on its own 127.x address in the host's
// namespace, or each in a namespace of its own on a bridge.
enum class NetworkMode { kLoopback, kBridge };

// A block of addresses that containers are given, e.g. "127.77.0.0/16".
struct AddressRange {
  uint32_t base = 0;  // host order
  uint32_t size = 0;
  uint32_t first = 1;  // the lowest offset given out: 2 on a bridge, whose gateway is offset 1
  // What it is when full, and how to get a larger one; "": the block and
  // --address-range. (--slurm-mode user: ports, slurm_jobs.h slot_port.)
  std::string what, larger;
  static Result<AddressRange> parse(const std::string& cidr, NetworkMode mode = NetworkMode::kLoopback);
  std::string gateway() const { return address(1); }  // on a bridge
  int prefix() const { return 32 - __builtin_ctz(size); }
  std::string address(uint32_t offset) const;
  std::string cidr() const;  // "127.77.0.0/16"
};

// `count` addresses of `range` not in `taken`, lowest first. Refuses (field
// "containers") when the range has fewer free.
Result<std::vector<std::string>> pick_addresses(const AddressRange& range, const std::set<std::string>& taken,
                                                 int count);

// For each of `containers` containers, `per_container` free GPUs of `model`
// from `inventory` (free: no holder). Refuses (field "gpu.count") when
// fewer are free; with per_container 0, `containers` empty lists.
Result<std::vector<std::vector<int>>> pick_gpus(const std::vector<Gpu>& inventory, const std::string& model,
                                                 int per_container, int containers);

}  // namespace edt::control
