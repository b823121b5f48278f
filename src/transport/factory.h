// The transport factory: which channels a group's transport is made of, and
// connecting them.
//
// The plan is a pure function of the kind asked for (EDT_TRANSPORT) and the
// topology: shared memory among the ranks of a host (unless kTcp), TCP to
// every other rank; with several hosts and shared memory inside at least
// one, the collectives run hierarchically. connect_transport() then makes
// this host's shared-memory segment through the store and connects the TCP
// mesh; it fails (with the rank and host in the message) when a peer does
// not arrive by the deadline.
//
// Threads: connect_transport() is called by every rank of the group at once,
// one call per rank.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "edt/status.h"
#include "edt/store.h"
#include "transport/shm/segment.h"
#include "transport/tcp/tcp_channel.h"
#include "transport/topology.h"
#include "transport/transport.h"

namespace edt::transport {

enum class TransportKind { kAuto, kTcp, kShm };

// "auto", "tcp" or "shm"; anything else is kInvalidArgument.
Result<TransportKind> parse_transport_kind(std::string_view name);

struct TransportPlan {
  bool shm = false;           // shared memory among this host's ranks
  bool tcp = false;           // TCP to some rank
  bool hierarchical = false;  // several hosts, and shared memory inside one
  std::string name;           // "shm", "tcp", "shm+tcp" or "none"
};

// kInvalidArgument for kShm when the ranks are on several hosts. `peers`
// name the hosts in that error.
Result<TransportPlan> plan_transport(TransportKind kind, const Topology& topology,
                                     const std::vector<PeerInfo>& peers);

// The spin of waits when none is asked for: long where this host's ranks
// have a core each, short where they share cores.
std::chrono::nanoseconds default_spin(int local_size);

struct TransportOptions {
  std::vector<PeerInfo> peers;  // every rank's
  Topology topology;
  TransportPlan plan;
  std::chrono::milliseconds timeout{30000};  // of a wait without progress
  std::chrono::nanoseconds spin{-1};         // negative: default_spin()
  Clock::time_point deadline;                // for connecting
  uint64_t nonce = 0;                        // the group's, shared by all ranks
};

struct ConnectedTransport {
  std::unique_ptr<Transport> transport;
  std::shared_ptr<shm::Segment> segment;  // null without shared memory
};

// Connects this rank (options.topology.rank) to every peer. Takes the
// listener this rank advertised in peers[rank].address and closes it
// whatever happens.
Result<ConnectedTransport> connect_transport(Store& store, tcp::Listener listener, TransportOptions options);

}  // namespace edt::transport
