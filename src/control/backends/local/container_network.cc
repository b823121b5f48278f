#include "control/backends/local/container_network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/io.h"
#include "control/backends/local/host_command.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIp = "/usr/sbin/ip";
constexpr const char* kNft = "/usr/sbin/nft";
constexpr const char* kNsenter = "/usr/bin/nsenter";
// The MTU of the bridge and of every container's link. Nothing leaves the
// host through the bridge, so its frames may be as large as loopback's.
const std::string kMtu = "65520";

// The network's programs, with the packages that bring them.
Result<std::string> run(const std::vector<std::string>& argv) {
  return run_host_command(argv, "iproute2, nftables, util-linux");
}

Status run_status(const std::vector<std::string>& argv) { return run(argv).status(); }

// The host routes packets between its interfaces only with this on; the
// kernel's default is off. Turned on (host-wide, as container runtimes with
// NAT do) whenever the filter is loaded with --outbound nat; never turned
// off, as other things on the host may rely on it by then.
Status enable_forwarding() {
  const char* path = "/proc/sys/net/ipv4/ip_forward";
  std::ofstream out(path);
  out << "1\n";
  if (!out.flush()) return Status(StatusCode::kIoError, std::string("write 1 to ") + path + " (--outbound nat)");
  return Status::ok();
}

// An IPv4 address in host order (0 if it is not one).
uint32_t host_order(const std::string& address) {
  in_addr addr{};
  inet_pton(AF_INET, address.c_str(), &addr);
  return ntohl(addr.s_addr);
}

// The name of edtd's nftables tables for `bridge` (one per family).
std::string table_of(const std::string& bridge) { return "edt_" + bridge; }

// "a.b.c.d[/len]" as [first, last] in host order; nullopt if not IPv4.
std::optional<std::pair<uint32_t, uint32_t>> block_of(const std::string& text, int default_len) {
  const auto slash = text.find('/');
  in_addr addr{};
  if (inet_pton(AF_INET, text.substr(0, slash).c_str(), &addr) != 1) return std::nullopt;
  int len = default_len;
  if (slash != std::string::npos) {
    auto [ptr, ec] = std::from_chars(text.data() + slash + 1, text.data() + text.size(), len);
    if (ec != std::errc() || len < 0 || len > 32) return std::nullopt;
  }
  const uint32_t size_minus_one = len == 0 ? ~0u : (len == 32 ? 0u : (1u << (32 - len)) - 1);
  const uint32_t first = ntohl(addr.s_addr) & ~size_minus_one;
  return std::pair{first, first + size_minus_one};
}

// What of the host's (addresses and routes, outside `bridge`) overlaps
// [first, last]: a description, or "" when nothing does.
Result<std::string> host_overlap(uint32_t first, uint32_t last, const std::string& bridge) {
  auto overlaps = [&](const std::string& text, int len) {
    auto block = block_of(text, len);
    return block && block->first <= last && first <= block->second;
  };
  EDT_ASSIGN_OR_RETURN(std::string addrs, run({kIp, "-j", "addr"}));
  auto links = nlohmann::json::parse(addrs, nullptr, false);
  for (const auto& link : links.is_array() ? links : nlohmann::json::array()) {
    if (link.value("ifname", "") == bridge) continue;
    for (const auto& a : link.value("addr_info", nlohmann::json::array())) {
      if (a.value("family", "") != "inet") continue;
      const std::string cidr = a.value("local", "") + "/" + std::to_string(a.value("prefixlen", 32));
      if (overlaps(cidr, 32)) return "address " + cidr + " on " + link.value("ifname", "?");
    }
  }
  EDT_ASSIGN_OR_RETURN(std::string routes, run({kIp, "-j", "route"}));
  auto table = nlohmann::json::parse(routes, nullptr, false);
  for (const auto& r : table.is_array() ? table : nlohmann::json::array()) {
    const std::string dst = r.value("dst", "");
    if (dst == "default" || r.value("dev", "") == bridge) continue;
    if (overlaps(dst, 32)) return "route " + dst + " via " + r.value("dev", "?");
  }
  return std::string();
}

}  // namespace

Result<std::string> ContainerNetwork::parse_mode(const std::string& flag) {
  if (flag == "loopback") return std::string();
  if (flag == "bridge") return std::string("edt0");
  const std::string fix = "; write --network loopback, --network bridge or --network bridge:NAME (NAME: up to 15 "
                          "letters, digits or '_', e.g. edt0)";
  if (!flag.starts_with("bridge:")) return invalid_argument("--network '" + flag + "' is not a network mode" + fix);
  const std::string name = flag.substr(7);
  bool good = !name.empty() && name.size() <= 15;
  for (char c : name) good = good && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!good) return invalid_argument("--network '" + flag + "': '" + name + "' cannot name a bridge" + fix);
  return name;
}

Status ContainerNetwork::check_range_free(const std::string& cidr, uint32_t base, uint32_t size,
                                          const std::string& bridge) {
  EDT_ASSIGN_OR_RETURN(std::string clash, host_overlap(base, base + (size - 1), bridge));
  if (clash.empty()) return Status::ok();
  return invalid_argument("--address-range " + cidr + " overlaps the host's " + clash +
                          ": containers could not reach it and it could not reach them; give a block the host does "
                          "not use (e.g. --address-range 198.19.0.0/16)");
}

Status ContainerNetwork::claim_bridge(const std::string& bridge, const std::string& data_dir) {
  std::error_code ec;
  fs::create_directories("/run/edt", ec);
  const std::string path = "/run/edt/bridge-" + bridge + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return io_error("open " + path, errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char owner[512] = {};
    const ssize_t n = ::pread(fd, owner, sizeof(owner) - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) return io_error("lock " + path, err);
    return invalid_argument("--network bridge:" + bridge + ": another edtd runs on that bridge (" +
                            std::string(owner, n > 0 ? static_cast<size_t>(n) : 0) +
                            "), and each would remove the other's containers' filter; give this one a bridge and "
                            "a block of its own, e.g. --network bridge:edt1 --address-range 198.19.128.0/17");
  }
  const std::string owner = "data dir " + data_dir + ", pid " + std::to_string(::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, owner.data(), owner.size(), 0) != static_cast<ssize_t>(owner.size()))
    return io_error("write " + path, errno);
  return Status::ok();  // fd stays open: the lock is this process's until it ends
}

std::string ContainerNetwork::container_mac(const std::string& address) {
  const uint32_t a = host_order(address);
  char mac[18];
  std::snprintf(mac, sizeof(mac), "02:ed:%02x:%02x:%02x:%02x", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
  return mac;
}

std::string ContainerNetwork::host_interface(const std::string& address) {
  char name[16];
  std::snprintf(name, sizeof(name), "edtv%08x", host_order(address));
  return name;
}

// Runs `commands` (`ip` commands without the `ip`) in one `ip -batch`, in
// the network namespace at `netns` if it is not empty; `file` holds them.
Status run_batch(const std::vector<std::string>& commands, const std::string& file, const std::string& netns) {
  std::string text;
  for (const auto& command : commands) text += command + "\n";
  {
    std::ofstream out(file, std::ios::trunc);
    out << text;
    if (!out.flush()) return Status(StatusCode::kIoError, "write " + file);
  }
  if (netns.empty()) return run_status({kIp, "-batch", file});
  return run_status({kNsenter, "--net=" + netns, kIp, "-batch", file});
}

// The commands that make the bridge, when it is missing or this edtd has
// not set it up yet (an earlier edtd's may lack its address).
std::vector<std::string> ContainerNetwork::bridge_commands() {
  const std::string& br = options_.bridge;
  std::vector<std::string> commands;
  std::error_code ec;
  const bool exists = fs::exists("/sys/class/net/" + br, ec);
  if (exists && bridge_ready_) return commands;
  if (!exists) commands.push_back("link add " + br + " mtu " + kMtu + " type bridge");
  commands.push_back("addr replace " + options_.gateway + "/" + std::to_string(options_.prefix) + " dev " + br);
  commands.push_back("link set " + br + " up");
  return commands;
}

Status ContainerNetwork::attach(const std::string& cluster, const std::string& name, const std::string& address,
                                pid_t init_pid) {
  if (!options_.parent.empty()) return attach_macvlan(cluster, name, address, init_pid);
  const std::string dir = options_.containers_dir + "/" + name, host = host_interface(address);
  const std::string what = "give container " + name + " its interface", pid = std::to_string(init_pid);
  std::error_code ec;
  // A pair left by an earlier container at this address whose namespace is
  // still going away.
  if (fs::exists("/sys/class/net/" + host, ec)) (void)run({kIp, "link", "del", host});
  {
    // The bridge made and the container counted in one step: forget()
    // removes the bridge only when no container is counted.
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> host_side = bridge_commands();
    host_side.push_back("link add " + host + " mtu " + kMtu + " type veth peer name eth0 mtu " + kMtu + " address " +
                        container_mac(address) + " netns " + pid);
    host_side.push_back("link set " + host + " master " + options_.bridge + " up");
    std::ofstream(dir + "/network") << cluster << " " << address << "\n";
    EDT_RETURN_IF_ERROR(run_batch(host_side, dir + "/network-host.ip", "").with_context(what));
    bridge_ready_ = true;
  }
  // The default route last: the sandbox starts sshd once it is there.
  EDT_RETURN_IF_ERROR(run_batch({"addr add " + address + "/" + std::to_string(options_.prefix) + " dev eth0",
                                 "link set eth0 up", "route add default via " + options_.gateway},
                                dir + "/network-ns.ip", "/proc/" + pid + "/ns/net")
                          .with_context(what));
  std::lock_guard<std::mutex> lock(mu_);
  return sync_filter();
}

Status ContainerNetwork::attach_macvlan(const std::string& cluster, const std::string& name,
                                        const std::string& address, pid_t init_pid) {
  const std::string dir = options_.containers_dir + "/" + name, link = host_interface(address);
  const std::string what = "give container " + name + " its interface on " + options_.parent;
  const std::string pid = std::to_string(init_pid), netns = "/proc/" + pid + "/ns/net";
  // A macvlan left in the node's namespace by an earlier try at this
  // address whose sandbox was gone before the link could move into it.
  std::error_code ec;
  if (fs::exists("/sys/class/net/" + link, ec)) (void)run({kIp, "link", "del", link});
  EDT_RETURN_IF_ERROR(run_batch({"link add link " + options_.parent + " name " + link + " address " +
                                     container_mac(address) + " type macvlan mode bridge",
                                 "link set " + link + " netns " + pid},
                                dir + "/network-host.ip", "")
                          .with_context(what));
  EDT_RETURN_IF_ERROR(run_batch({"link set " + link + " name eth0",
                                 "addr add " + address + "/" + std::to_string(options_.prefix) + " dev eth0",
                                 "link set eth0 up"},
                                dir + "/network-ns.ip", netns)
                          .with_context(what));
  EDT_RETURN_IF_ERROR(filter_macvlan(name, init_pid, cluster_peers(cluster)));
  const std::string route = options_.gateway.empty() ? "route add default dev eth0"
                                                     : "route add default via " + options_.gateway;
  return run_batch({route}, dir + "/network-route.ip", netns).with_context(what);
}

std::vector<std::string> ContainerNetwork::cluster_peers(const std::string& cluster) const {
  std::set<std::string> peers;
  std::ifstream hosts(fs::path(options_.containers_dir).parent_path() / "clusters" / cluster / "mpi" / "hosts");
  std::string address, rest;
  while (hosts >> address && std::getline(hosts, rest))
    if (address != "127.0.0.1") peers.insert(address);
  return {peers.begin(), peers.end()};
}

std::string ContainerNetwork::macvlan_filter(const std::vector<std::string>& peers, const std::string& login_address,
                                             const std::string& range) {
  // One rule per address set; nft refuses an empty set.
  auto rule = [](const char* field, std::vector<std::string> addresses, const char* verdict) -> std::string {
    std::string set;
    for (const auto& address : addresses)
      if (!address.empty()) set += (set.empty() ? "" : ", ") + address;
    return set.empty() ? "" : std::string("    ip ") + field + " { " + set + " } " + verdict + "\n";
  };
  std::vector<std::string> in = peers;
  in.push_back(login_address);
  return "table inet edt_container\ndelete table inet edt_container\n"
         "table inet edt_container {\n"
         "  chain input {\n"
         "    type filter hook input priority 0; policy drop;\n"
         "    iif \"lo\" accept\n"
         "    ct state established,related accept\n" +
         rule("saddr", in, "accept") +
         "  }\n"
         "  chain output {\n"
         "    type filter hook output priority 0; policy accept;\n"
         "    oif \"lo\" accept\n"
         "    ct state established,related accept\n" +
         rule("daddr", peers, "accept") + rule("daddr", {login_address}, "drop") +
         rule("daddr", {range}, "drop") +
         "  }\n"
         "}\n";
}

Status ContainerNetwork::filter_macvlan(const std::string& name, pid_t init_pid,
                                        const std::vector<std::string>& peers) {
  const std::string path = options_.containers_dir + "/" + name + "/filter.nft";
  EDT_RETURN_IF_ERROR(io::write_file(path, macvlan_filter(peers, options_.login_address, options_.range), 0644));
  return run_status({kNsenter, "--net=/proc/" + std::to_string(init_pid) + "/ns/net", kNft, "-f", path})
      .with_context("filter the connections into container " + name);
}

Status ContainerNetwork::forget() {
  if (!options_.parent.empty()) return Status::ok();
  std::lock_guard<std::mutex> lock(mu_);
  return sync_filter();
}

std::string ContainerNetwork::ruleset(bool empty) const {
  const std::string table = table_of(options_.bridge);
  std::string text;
  for (const char* family : {"bridge", "inet", "ip"})
    text += std::string("table ") + family + " " + table + "\ndelete table " + family + " " + table + "\n";
  if (empty) return text;
  std::map<std::string, std::vector<std::string>> clusters;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.containers_dir, ec)) {
    std::ifstream in(entry.path() / "network");
    std::string cluster, address;
    if (in >> cluster >> address) clusters[cluster].push_back(address);
  }
  return text + bridge_table(options_.bridge, clusters) + host_tables();
}

// The bridge family's table: frames between two ports pass only within a
// cluster. Only frames between this bridge's ports are judged: another
// bridge's (another edtd's, Docker's) pass this table untouched.
//
// Each rule checks both ports as well as both addresses: a broadcast (an
// ARP request) is flooded to every port, and the forward hook sees it once
// per egress port, so the egress check is what keeps one cluster's ARP
// requests (which carry the sender's MAC, and update any neighbour entry
// the receiver holds for that address) from reaching another's containers.
// The host's own frames (the gateway's ARP) take the output and input
// hooks, not this one.
std::string ContainerNetwork::bridge_table(const std::string& bridge,
                                           const std::map<std::string, std::vector<std::string>>& clusters) {
  std::string ports, sets, rules;
  int index = 0;
  for (const auto& [cluster, addresses] : clusters) {
    const std::string n = std::to_string(index++), set = "c" + n, own = "p" + n;
    std::string own_ports;
    for (const auto& address : addresses)
      own_ports += (own_ports.empty() ? " \"" : ", \"") + host_interface(address) + "\"";
    ports += (ports.empty() ? "" : ",") + own_ports;
    sets += "  set " + set + " { type ipv4_addr; comment \"" + cluster + "\"; elements = {";
    for (size_t i = 0; i < addresses.size(); ++i) sets += (i ? ", " : " ") + addresses[i];
    sets += " } }\n";
    sets += "  set " + own + " { type ifname; comment \"" + cluster + "\"; elements = {" + own_ports + " } }\n";
    // ARP too: a container learns no other cluster's addresses or MACs.
    const std::string between = "    iifname @" + own + " oifname @" + own + " ";
    rules += between + "arp saddr ip @" + set + " arp daddr ip @" + set + " accept\n";
    rules += between + "ip saddr @" + set + " ip daddr @" + set + " accept\n";
  }
  return "table bridge " + table_of(bridge) + " {\n  set ports { type ifname; elements = {" + ports + " } }\n" +
         sets + "  chain forward {\n    type filter hook forward priority 0; policy accept;\n" +
         "    iifname != @ports accept\n" + rules + "    drop\n  }\n}\n";
}

// The inet table (and with --outbound nat the ip one): what passes between
// the bridge and the host or its other interfaces. The forward chain drops
// what is routed between the bridge and another interface; frames bridged
// between two ports also pass it (in and out the bridge) where br_netfilter
// is loaded, and are judged by the bridge table instead.
std::string ContainerNetwork::host_tables() const {
  const std::string table = table_of(options_.bridge), br = "\"" + options_.bridge + "\"";
  const std::string gw = options_.gateway, range = options_.range;
  // Traffic between two containers skips connection tracking (where
  // br_netfilter hands bridged frames to the ip hooks, the kernel would
  // track every connection of every job, a tenth of a 64 MiB allreduce's
  // time); no rule judges it by state. The gateway's stays tracked: replies
  // to what the host opens are let in by their state.
  std::string text = "table inet " + table + " {\n  chain prerouting {\n    type filter hook prerouting priority "
                     "raw; policy accept;\n    ip saddr " + range + " ip daddr " + range + " ip saddr != " + gw +
                     " ip daddr != " + gw + " notrack\n  }\n";
  text += "  chain input {\n    type filter hook input priority 0; policy accept;\n"
          "    iifname " + br + " ct state established,related accept\n    iifname " + br + " drop\n  }\n"
          "  chain forward {\n    type filter hook forward priority 0; policy accept;\n" + outbound_rules(br) +
          "    iifname " + br + " oifname != " + br + " drop\n    oifname " + br + " iifname != " + br + " drop\n  }\n}\n";
  if (options_.outbound_nat)
    text += "table ip " + table + " {\n  chain postrouting {\n    type nat hook postrouting priority srcnat; "
            "policy accept;\n    ip saddr " + range + " oifname != " + br + " masquerade\n  }\n}\n";
  return text;
}

// With --outbound nat, the inet forward chain's accepts (before its drops):
// connections from a container out of the host, and their replies.
std::string ContainerNetwork::outbound_rules(const std::string& br) const {
  if (!options_.outbound_nat) return "";
  return "    iifname " + br + " oifname != " + br + " accept\n    oifname " + br + " iifname != " + br +
         " ct state established,related accept\n";
}

std::vector<std::string> ContainerNetwork::forward_drop_chains(const std::string& ruleset_json,
                                                               const std::string& bridge) {
  std::vector<std::string> found;
  auto doc = nlohmann::json::parse(ruleset_json, nullptr, false);
  if (!doc.is_object() || !doc.contains("nftables") || !doc["nftables"].is_array()) return found;
  for (const auto& item : doc["nftables"]) {
    if (!item.is_object() || !item.contains("chain") || !item["chain"].is_object()) continue;
    const auto& c = item["chain"];
    const std::string family = c.value("family", ""), table = c.value("table", "");
    if (c.value("hook", "") != "forward" || c.value("policy", "") != "drop") continue;
    if (family != "ip" && family != "inet") continue;
    if (table == table_of(bridge)) continue;
    found.push_back(family + " " + table + " " + c.value("name", "?"));
  }
  return found;
}

std::string ContainerNetwork::firewall_warning(const std::string& bridge, bool outbound_nat) {
  std::ifstream sysctl("/proc/sys/net/bridge/bridge-nf-call-iptables");
  std::string value;
  const bool br_netfilter = (sysctl >> value) && value == "1";
  if (!br_netfilter && !outbound_nat) return "";
  auto listed = run({kNft, "-j", "list", "ruleset"});
  if (!listed.is_ok()) return "";
  const std::vector<std::string> chains = forward_drop_chains(*listed, bridge);
  if (chains.empty()) return "";
  std::string names;
  for (const auto& c : chains) names += (names.empty() ? "" : ", ") + c;
  std::string what;
  if (outbound_nat) what = "connections out of the host (--outbound nat)";
  if (br_netfilter)
    what += std::string(what.empty() ? "" : " and ") +
            "traffic between the containers of a cluster (br_netfilter passes bridged frames to it: "
            "net.bridge.bridge-nf-call-iptables = 1)";
  return "the host's firewall drops forwarded packets by default (" + names + ", policy drop; Docker sets this), "
         "so it may drop " + what + " on bridge " + bridge + " unless a rule there accepts them; allow the bridge's "
         "traffic there, e.g. nft insert rule " + chains.front() + " iifname " + bridge + " accept and nft insert "
         "rule " + chains.front() + " oifname " + bridge + " accept (edtd's own filter still keeps clusters apart "
         "and the outside out); with Docker: iptables -I DOCKER-USER -i " + bridge + " -j ACCEPT and iptables -I "
         "DOCKER-USER -o " + bridge + " -j ACCEPT";
}

Status ContainerNetwork::sync_filter() {
  bool any = false;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.containers_dir, ec))
    any = any || fs::exists(entry.path() / "network", ec);
  // Beside the containers' directory, which may not exist yet.
  const std::string path = (fs::path(options_.containers_dir).parent_path() / "network.nft").string();
  {
    std::ofstream out(path, std::ios::trunc);
    out << ruleset(!any);
    if (!out.flush()) return Status(StatusCode::kIoError, "write " + path);
  }
  EDT_RETURN_IF_ERROR(run_status({kNft, "-f", path}).with_context("load the containers' filter"));
  if (any) return options_.outbound_nat ? enable_forwarding() : Status::ok();
  std::error_code gone;
  bridge_ready_ = false;
  if (!fs::exists("/sys/class/net/" + options_.bridge, gone)) return Status::ok();
  return run_status({kIp, "link", "del", options_.bridge}).with_context("remove bridge " + options_.bridge);
}

}  // namespace edt::control
