// Peer discovery through a store: each of `size` ranks publishes one entry
// (an opaque blob: for a communicator, its host, listener address and
// process) and reads every rank's, so that all ranks leave with the same
// table, indexed by rank. This is the only step of forming a group that
// needs the store and no transport; what the blobs mean, and the mesh that
// is connected from them, belong to the layers above (collectives and
// transport), which this layer may not see.
//
// Keys (in the store as given, scoped by the caller's PrefixStore):
//   rank/<r>   rank r's blob, written once by compare-and-set from "".
//
// Failure modes, every one a Status on the calling rank, never a hang:
//   - kAlreadyExists: rank/<rank> holds another process's blob (two
//     processes were given one rank); `describe` names that process.
//   - kTimeout: some rank did not publish before `deadline`; the message
//     lists which ranks are missing.
//   - what the store returns (a lost connection, ...), as it is.
// Any thread may call it; it keeps no state.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "edt/store.h"

namespace edt::rendezvous {

struct PeerExchange {
  int rank = 0;
  int size = 0;
  std::string blob;  // this rank's entry
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds timeout{0};  // the whole wait, as the timeout message states it
  // Names the process whose blob took this rank, for the kAlreadyExists
  // message ("host h pid p"); "?" when it cannot tell.
  std::function<std::string(const std::string& blob)> describe;
};

// Publishes exchange.blob as rank/<rank>, waits for rank/0..rank/<size-1>,
// and returns their blobs in rank order.
Result<std::vector<std::string>> exchange_blobs(Store& store, const PeerExchange& exchange);

}  // namespace edt::rendezvous
