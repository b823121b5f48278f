// ContainerNetwork: in edtd's bridge mode (`--network bridge[:NAME]`), each
// container has a network namespace of its own, joined to a bridge on the
// host that edtd owns.
//
// Terms: the bridge (default edt0) carries the gateway, the first usable
// address of the range (offset 1), with the range's prefix; it is the host's
// only address there. Each container gets a veth pair: the host end
// (edtv<address in hex>) is a port of the bridge, the other end is eth0 in
// the container's namespace with the container's address and a MAC made
// from it (container_mac), and a default route via the gateway. lo is bwrap's:
// it brings it up as it makes the namespace, while edtd may already be
// attaching eth0, so edtd leaves lo alone (two writers raced there).
//
// Filtering, in nftables tables named edt_<bridge> (bridge, inet, and ip
// with --outbound nat) that edtd owns and rewrites whole (one `nft -f`,
// atomic) when it starts and whenever a container joins or leaves:
//   bridge family, forward: from a container's port (the set of host ends),
//     ARP, and IPv4 only, from a port of a cluster to a port of the same
//     cluster and from an address of that cluster to an address of it; the
//     rest is dropped (other clusters, whoever the user; IPv6, and with it
//     its neighbour discovery). Checking the egress port keeps a cluster's
//     broadcast ARP requests, flooded to every port, from its own ports.
//   inet family, prerouting: traffic between two containers is not
//     tracked (no rule judges it by state);
//   inet family, input: from the bridge only replies to connections the host
//     opened (edtd's API, host sshd, anything on 0.0.0.0 is unreachable);
//     forward: with --outbound nat, connections a container opens to
//     another interface (and their replies); nothing else is routed between
//     the bridge and another interface; frames bridged between ports, which
//     pass here too where br_netfilter is loaded, are left to the bridge
//     table.
//   ip family (--outbound nat only), postrouting: the range's addresses
//     leaving by another interface are masqueraded as the host's.
// A container has no CAP_NET_ADMIN or CAP_NET_RAW (sandbox_policy.h), so it
// cannot change its address or forge packets from another.
//
// Who belongs: each container directory that holds a `network` file
// ("<cluster> <address>"), written by attach(); a directory removed is a
// container gone. When none is left (the last cluster deleted, or scaled to
// nothing), the tables and the bridge are removed. The veth pair goes with the container's namespace, which
// ends with the sandbox's init.
//
// Threads: every method may be called from any thread; a mutex orders them.
// Errors: a failed `ip` or `nft` returns its stderr, with what was being done.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>
#include <sys/types.h>

#include "edt/status.h"

namespace edt::control {

struct ContainerNetworkOptions {
  std::string bridge;  // the bridge's name: letters, digits, '_'; at most 15
  std::string gateway;  // the bridge's address on the host
  int prefix = 0;       // the range's prefix length
  std::string containers_dir;  // <data dir>/containers
  // --outbound nat: containers may open connections out of the host (their
  // source address masqueraded as the host's). Off: nothing is routed
  // between the bridge and another interface.
  bool outbound_nat = false;
  std::string range;  // the range, a.b.c.d/len: what is masqueraded, and untracked between containers
  // Macvlan mode (a Slurm node, slurm_node.h): eth0 is a macvlan of this
  // interface of the node, its address one of the node network's, its
  // default route on-link (or via `gateway` when given). No bridge: the
  // containers' network is the site's. A filter in the container's own
  // namespace (which its root cannot change, having no CAP_NET_ADMIN) lets
  // connections in only from its cluster's containers (the addresses in
  // the cluster's hosts file, <data dir>/clusters/<cluster>/mpi/hosts) and
  // from `login_address` (edtd's host: its terminals, Jupyter proxy and
  // ssh). Out, it opens connections to its cluster's containers and beyond
  // the nodes' network, as the site routes, but none to `login_address` or
  // to another address of `range` (other clusters); replies pass.
  std::string parent;
  std::string login_address;
};

class ContainerNetwork {
 public:
  explicit ContainerNetwork(ContainerNetworkOptions options) : options_(std::move(options)) {}

  // "loopback" -> "" (no bridge), "bridge" -> "edt0", "bridge:NAME" -> NAME.
  // Refuses anything else, or a name an interface cannot have.
  static Result<std::string> parse_mode(const std::string& flag);
  // Refuses `cidr` when it overlaps an address or a route of the host (`ip
  // -j addr`, `ip -j route`), naming both; the bridge's own address and
  // route (an earlier edtd's) do not count, nor the default route.
  static Status check_range_free(const std::string& cidr, uint32_t base, uint32_t size, const std::string& bridge);
  // Takes the bridge for this edtd (an flock on /run/edt/bridge-NAME.lock,
  // held until the process ends): another edtd on the same bridge would
  // rewrite its filter and remove it under this one's containers. Refused,
  // naming the other edtd's data dir and pid, while one holds it.
  static Status claim_bridge(const std::string& bridge, const std::string& data_dir);
  // The base chains of `nft -j list ruleset` output, outside edtd's own
  // tables for `bridge`, that drop forwarded packets by default ("ip filter
  // FORWARD", as Docker's iptables make it): they drop containers' traffic
  // out of the host and, where br_netfilter passes bridged frames to them,
  // between a cluster's containers. Empty when there is none.
  static std::vector<std::string> forward_drop_chains(const std::string& ruleset_json, const std::string& bridge);
  // A warning to log at start when the host's firewall would drop the
  // bridge's traffic (see forward_drop_chains), naming the fix; "" if not.
  static std::string firewall_warning(const std::string& bridge, bool outbound_nat);

  // Makes the bridge if it is missing, then gives the namespace of
  // `init_pid` its interface and `address`, and lets it reach the rest of
  // `cluster` (and nothing else).
  Status attach(const std::string& cluster, const std::string& name, const std::string& address, pid_t init_pid);
  // Macvlan mode's attach: the interface, then the filter, then the
  // default route (after which the sandbox starts sshd).
  Status attach_macvlan(const std::string& cluster, const std::string& name, const std::string& address,
                        pid_t init_pid);
  // Macvlan mode: the addresses of `cluster`'s containers now, sorted.
  std::vector<std::string> cluster_peers(const std::string& cluster) const;
  // Macvlan mode: loads the container's filter (macvlan_filter) for its
  // cluster's `peers` into the namespace of `init_pid`, replacing the one it had.
  Status filter_macvlan(const std::string& name, pid_t init_pid, const std::vector<std::string>& peers);
  // The nft script of that filter: connections in from `peers` and
  // `login_address`; out to `peers`, never to `login_address` or the rest of
  // `range` (other clusters' containers); replies both ways.
  static std::string macvlan_filter(const std::vector<std::string>& peers, const std::string& login_address,
                                    const std::string& range);
  // The bridge family's table of `bridge` for `clusters` (cluster -> its
  // containers' addresses): frames between two ports pass only when both
  // ports and both addresses (IPv4, or ARP's) are one cluster's.
  static std::string bridge_table(const std::string& bridge,
                                  const std::map<std::string, std::vector<std::string>>& clusters);
  // Rewrites the filter from the containers' directories, with this edtd's
  // options (at start, and after a container's directory is gone); with no
  // container left, removes the tables and the bridge.
  Status forget();

  // The host end of the pair of the container at `address`.
  static std::string host_interface(const std::string& address);
  // The MAC of the eth0 of the container at `address`: 02:ed (locally
  // administered) and the address's four bytes. A container restarted at
  // its address comes back with the same MAC, so the neighbour entries the
  // host and its peers hold for it stay true (with a new random MAC they
  // would send to the old one until their entries expire, up to a minute).
  static std::string container_mac(const std::string& address);

 private:
  std::vector<std::string> bridge_commands();  // with mu_ held
  Status sync_filter();                        // with mu_ held
  std::string ruleset(bool empty) const;
  std::string host_tables() const;
  std::string outbound_rules(const std::string& br) const;  // br: the bridge's name, quoted

  ContainerNetworkOptions options_;
  std::mutex mu_;
  bool bridge_ready_ = false;  // set up by this edtd since it was last removed; under mu_
};

}  // namespace edt::control
