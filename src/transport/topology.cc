#include "transport/topology.h"

#include <algorithm>
#include <map>

namespace edt::transport {

Topology compute_topology(const std::vector<std::string>& hosts, int rank) {
  Topology t;
  t.rank = rank;
  const int size = static_cast<int>(hosts.size());
  std::map<std::string, int> index_of;
  std::vector<int> ranks_on;  // per host
  for (int r = 0; r < size; ++r) {
    auto [it, fresh] = index_of.emplace(hosts[r], t.hosts());
    if (fresh) {
      t.leaders.push_back(r);
      ranks_on.push_back(0);
    }
    t.host_of.push_back(it->second);
    ++ranks_on[it->second];
  }
  t.host_index = t.host_of[rank];
  for (int r = 0; r < size; ++r)
    if (t.host_of[r] == t.host_index) t.local_members.push_back(r);
  t.local_rank = static_cast<int>(std::find(t.local_members.begin(), t.local_members.end(), rank) -
                                  t.local_members.begin());
  for (int h = 0; h < t.hosts(); ++h) {
    t.largest_host = std::max(t.largest_host, ranks_on[h]);
    if (ranks_on[h] <= t.local_rank) continue;  // no rank with this local rank
    if (h < t.host_index) ++t.cross_rank;
    ++t.cross_size;
  }
  return t;
}

}  // namespace edt::transport
