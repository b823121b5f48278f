#include "control/allocation/allot.h"

namespace edt::control {

Status allot_containers(Database::Tx& tx, const AddressRange& range, const ClusterSpec& spec, int from, int to) {
  auto addresses = pick_addresses(range, tx.addresses(), to - from);
  if (!addresses.is_ok()) return addresses.status();
  auto gpus = pick_gpus(tx.gpus(), spec.gpu.model, spec.gpu.count, to - from);
  if (!gpus.is_ok()) return gpus.status();
  for (int index = from; index < to; ++index) {
    ContainerStatus c;
    c.name = container_name(spec.name, index);
    c.index = index;
    c.address = (*addresses)[static_cast<size_t>(index - from)];
    c.gpus = (*gpus)[static_cast<size_t>(index - from)];
    if (Status st = tx.hold_gpus(c.name, c.gpus); !st.is_ok()) return as_refusal(st, "gpu");
    if (Status st = tx.insert_container(spec.name, c); !st.is_ok()) {
      if (st.code() == StatusCode::kAlreadyExists)
        return conflict("containers", "container " + c.name + " still exists (" + st.message() + ")",
                        "wait until the cluster is Running, then retry");
      return as_refusal(st, "");
    }
  }
  return Status::ok();
}

}  // namespace edt::control
