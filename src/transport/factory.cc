#include "transport/factory.h"

#include <unistd.h>

#include "common/cpu.h"
#include "transport/shm/shm_channel.h"

namespace edt::transport {
namespace {

// How long waits spin before they yield (see backoff.h).
constexpr auto kSpinWithCoreEach = std::chrono::milliseconds(5);
constexpr auto kSpinSharingCores = std::chrono::microseconds(2);

std::string peer_name(const std::vector<PeerInfo>& peers, int r) {
  return "rank " + std::to_string(r) + " (host " + peers[r].host + ")";
}

// Shared memory to the other ranks of this host, in channels[peer].
Result<std::shared_ptr<shm::Segment>> connect_host(Store& store, const TransportOptions& options,
                                                   std::vector<std::unique_ptr<Channel>>* channels) {
  const Topology& t = options.topology;
  shm::Segment::Options so;
  so.key = "shm/" + std::to_string(t.host_index);
  so.local_rank = t.local_rank;
  so.local_size = t.local_size();
  so.deadline = options.deadline;
  auto made = shm::Segment::create(store, so);
  if (!made.is_ok())
    return made.status().with_context("rank " + std::to_string(t.rank) + " on host " + options.peers[t.rank].host);
  std::shared_ptr<shm::Segment> segment = std::move(made).value();
  for (int i = 0; i < t.local_size(); ++i) {
    const int r = t.local_members[i];
    if (r == t.rank) continue;
    (*channels)[r] =
        shm::make_channel(segment, t.local_rank, i, peer_name(options.peers, r), options.peers[r].process, t.rank);
  }
  return segment;
}

}  // namespace

Result<TransportKind> parse_transport_kind(std::string_view name) {
  if (name == "auto") return TransportKind::kAuto;
  if (name == "tcp") return TransportKind::kTcp;
  if (name == "shm") return TransportKind::kShm;
  return invalid_argument("transport '" + std::string(name) + "' is unknown; use auto, tcp or shm (EDT_TRANSPORT)");
}

Result<TransportPlan> plan_transport(TransportKind kind, const Topology& topology,
                                     const std::vector<PeerInfo>& peers) {
  const int hosts = topology.hosts();
  if (kind == TransportKind::kShm && hosts > 1)
    return invalid_argument("transport shm needs every rank on one host, but ranks are on " + std::to_string(hosts) +
                            " hosts (" + peers[topology.leaders[0]].host + ", " + peers[topology.leaders[1]].host +
                            ", ...); use auto or tcp");
  TransportPlan plan;
  plan.shm = kind != TransportKind::kTcp && topology.local_size() > 1;
  plan.tcp = kind == TransportKind::kTcp ? topology.size() > 1 : hosts > 1;
  plan.hierarchical = kind != TransportKind::kTcp && hosts > 1 && topology.largest_host > 1;
  plan.name = plan.shm && plan.tcp ? "shm+tcp" : plan.shm ? "shm" : plan.tcp ? "tcp" : "none";
  return plan;
}

std::chrono::nanoseconds default_spin(int local_size) {
  if (local_size <= cpu::usable_cores()) return kSpinWithCoreEach;
  return kSpinSharingCores;
}

Result<ConnectedTransport> connect_transport(Store& store, tcp::Listener listener, TransportOptions options) {
  struct CloseUnlessHandedOn {
    int* fd;
    ~CloseUnlessHandedOn() {
      if (*fd >= 0) ::close(*fd);
    }
  } closer{&listener.fd};
  const Topology& t = options.topology;
  const int size = t.size();
  std::vector<std::unique_ptr<Channel>> channels(size);
  ConnectedTransport out;
  if (options.plan.shm) {
    EDT_ASSIGN_OR_RETURN(out.segment, connect_host(store, options, &channels));
  }
  std::vector<bool> tcp_peers(size, false);
  std::vector<std::string> addresses(size), names(size);
  for (int r = 0; r < size; ++r) {
    tcp_peers[r] = r != t.rank && !channels[r];
    addresses[r] = options.peers[r].address;
    names[r] = peer_name(options.peers, r);
  }
  tcp::Listener handed = listener;
  listener.fd = -1;  // connect_mesh closes it
  EDT_RETURN_IF_ERROR(
      tcp::connect_mesh(t.rank, addresses, tcp_peers, handed, options.nonce, options.deadline, names, &channels));
  const auto spin = options.spin.count() < 0 ? default_spin(t.local_size()) : options.spin;
  Doorbell* doorbell = out.segment ? &out.segment->doorbell(t.local_rank) : nullptr;
  out.transport = std::make_unique<Transport>(t.rank, std::move(options.peers), std::move(channels), options.timeout,
                                              spin, doorbell);
  return out;
}

}  // namespace edt::transport
