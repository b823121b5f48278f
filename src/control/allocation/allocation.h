// Allocation policy: which addresses and GPUs new containers get. Pure
// functions of what is taken; the service calls them inside the transaction
// that reads what is taken and records what they pick, so two requests
// cannot pick the same address or GPU.
//
// Addresses come from a block inside 127.0.0.0/8 (AddressRange), lowest
// free first; the block's first and last addresses are never given out.
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

// A block of addresses in 127.0.0.0/8 that containers are given, e.g.
// "127.77.0.0/16".
struct AddressRange {
  uint32_t base = 0;  // host order
  uint32_t size = 0;
  static Result<AddressRange> parse(const std::string& cidr);
  std::string address(uint32_t offset) const;
  std::string cidr() const;  // "127.77.0.0/16"
};

// `count` addresses of `range` not in `taken`, lowest first. Refuses (field
// "containers") when the range has fewer free.
Outcome<std::vector<std::string>> pick_addresses(const AddressRange& range, const std::set<std::string>& taken,
                                                 int count);

// For each of `containers` containers, `per_container` free GPUs of `model`
// from `inventory` (free: no holder). Refuses (field "gpu.count") when
// fewer are free; with per_container 0, `containers` empty lists.
Outcome<std::vector<std::vector<int>>> pick_gpus(const std::vector<Gpu>& inventory, const std::string& model,
                                                 int per_container, int containers);

}  // namespace edt::control
