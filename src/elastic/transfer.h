// Sliced state transfer: how workers that join get the committed state.
//
// Every holder (a member whose last commit is the newest: they all hold the
// same committed bytes) sends slice k of n of those bytes (slice_of) to
// every receiver, each over a TCP connection of its own, all at once. A
// receiver's state so arrives at the rate of its own link, not of one
// sender's, and no holder receives anything.
//
// Protocol: a receiver connects to each holder's SliceServer and sends a
// request {nonce, begin, end}; the holder answers with bytes [begin, end)
// of its committed state. The nonce (from the generation) refuses a
// connection meant for another transfer.
//
// Errors: a peer that closes or resets its connection (it died) is
// kPeerFailed; cancelled() turning true (a newer generation was announced)
// is kHostsUpdated; no byte moving for `idle` is kTimeout. Either side then
// holds what it held before: a holder its committed state, a receiver its
// own (nothing is loaded until every byte is in).
//
// Thread safety: a SliceServer is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "edt/status.h"

namespace edt::elastic {

struct Range {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

// Slice k of n of `total` bytes: consecutive, disjoint, sizes differing by
// at most one byte.
Range slice_of(size_t total, int k, int n);

// The committed state as the pieces it is kept in, in order.
using Pieces = std::vector<std::string_view>;

struct TransferControl {
  std::chrono::milliseconds idle{30000};  // most time without a byte moving
  std::function<bool()> cancelled = [] { return false; };
};

class SliceServer {
 public:
  // Listens on every address, on a free port; peers reach it at address().
  static Result<std::unique_ptr<SliceServer>> open(const std::string& host);
  ~SliceServer();
  SliceServer(const SliceServer&) = delete;
  SliceServer& operator=(const SliceServer&) = delete;

  // "host:port": `host` is the worker's host identity (EDT_HOSTNAME), an
  // address or a name its peers resolve.
  const std::string& address() const { return address_; }

  // Accepts `receivers` connections and sends each the range of `pieces`
  // it asks for, all at once. Returns the bytes sent.
  Result<int64_t> serve(const Pieces& pieces, int receivers, uint64_t nonce, const TransferControl& control);

 private:
  SliceServer(int fd, std::string address) : fd_(fd), address_(std::move(address)) {}
  int fd_;
  std::string address_;
};

// Fills `out` (of `size` bytes) with slice k of holders.size() from
// holders[k], all at once; (*bytes_from)[k] = the bytes that came from
// holders[k].
Status fetch_slices(const std::vector<std::string>& holders, char* out, size_t size, uint64_t nonce,
                    const TransferControl& control, std::vector<int64_t>* bytes_from);

}  // namespace edt::elastic
