// Topology: how the ranks of a group sit on hosts, computed from every rank's
// host identity alone (ranks with equal host identity share a host and its
// memory). Hosts are numbered in order of first appearance; a host's leader
// is its lowest rank. cross_rank and cross_size are Horovod's: the ranks with
// this rank's local rank, one per host that has that many ranks.
//
// A pure function: every rank computes the same hosts, leaders and members
// from the same list.
#pragma once

#include <string>
#include <vector>

namespace edt::transport {

struct Topology {
  int rank = 0;
  int host_index = 0;               // this rank's host
  std::vector<int> host_of;         // per rank: its host's index
  std::vector<int> leaders;         // per host: its lowest rank
  std::vector<int> local_members;   // this host's ranks, ascending
  int local_rank = 0;               // index in local_members
  int cross_rank = 0, cross_size = 0;
  int largest_host = 0;             // ranks on the most crowded host

  int size() const { return static_cast<int>(host_of.size()); }
  int hosts() const { return static_cast<int>(leaders.size()); }
  int local_size() const { return static_cast<int>(local_members.size()); }
};

// The topology seen by `rank` of the group whose rank r says it is on
// hosts[r]. `rank` must index hosts.
Topology compute_topology(const std::vector<std::string>& hosts, int rank);

}  // namespace edt::transport
