// An elastic job's hosts as last read from its HostSource, and the order in
// which each host first appeared: older hosts keep the lower ranks, so a
// host that comes back (or a list that is reordered) does not reshuffle the
// job.
//
// From the list and a Blacklist it answers the elastic driver's questions:
// which (host, slot) pairs should run a worker, how many slots are usable,
// and whether any host can still be used. Reading the source is the
// table's job too: again when the source's interval has passed or it
// signalled a change; a failed read keeps the previous list (and says so).
// Not thread safe; the elastic driver's loop owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "edt/status.h"
#include "launcher/blacklist.h"
#include "launcher/host_source.h"

namespace edt::launcher {

using Slot = std::pair<std::string, int>;  // a host and a slot index on it

class HostTable {
 public:
  explicit HostTable(std::unique_ptr<HostSource> source) : source_(std::move(source)) {}

  // The first read; an error is the job's (there is no list to keep).
  Status read_first();
  // Reads the source again if its interval has passed or `changed`.
  void refresh(bool changed);

  HostSource& source() { return *source_; }
  const std::vector<HostSlots>& hosts() const { return hosts_; }
  // The host's place in order of first appearance (0 first); the host must
  // have been listed.
  int64_t order(const std::string& host) const { return order_.at(host); }

  // The slots that should run a worker: hosts in order of first appearance,
  // skipping blacklisted ones, at most max_np.
  std::vector<Slot> wanted(Blacklist& blacklist, int max_np) const;
  // The slots of hosts not blacklisted, at most max_np.
  int usable_slots(Blacklist& blacklist, int max_np) const;
  // False when hosts are listed and every one is blacklisted for good.
  bool any_hope(const Blacklist& blacklist) const;

 private:
  void remember_order();

  std::unique_ptr<HostSource> source_;
  std::vector<HostSlots> hosts_;
  std::map<std::string, int64_t> order_;
  std::chrono::steady_clock::time_point next_read_;
};

}  // namespace edt::launcher
