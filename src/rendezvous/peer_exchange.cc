#include "rendezvous/peer_exchange.h"

#include <algorithm>

namespace edt::rendezvous {

namespace {

std::string rank_key(int rank) { return "rank/" + std::to_string(rank); }

// The ranks of `keys` that have no entry yet, as "1, 3".
std::string missing_ranks(Store& store, const std::vector<std::string>& keys) {
  std::string missing;
  for (size_t r = 0; r < keys.size(); ++r) {
    auto v = store.try_get(keys[r]);
    if (v.is_ok() && !v->has_value()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  return missing;
}

}  // namespace

Result<std::vector<std::string>> exchange_blobs(Store& store, const PeerExchange& exchange) {
  auto left = [&] {
    return std::max(std::chrono::duration_cast<Store::Duration>(exchange.deadline - std::chrono::steady_clock::now()),
                    Store::Duration(1));
  };
  const std::string rank = std::to_string(exchange.rank);
  EDT_ASSIGN_OR_RETURN(std::string stored, store.compare_set(rank_key(exchange.rank), "", exchange.blob));
  if (stored != exchange.blob)
    return already_exists("rank " + rank + " is already taken in this group (by " +
                          (exchange.describe ? exchange.describe(stored) : std::string("?")) +
                          "); every process needs its own rank (EDT_RANK)");
  std::vector<std::string> keys;
  for (int r = 0; r < exchange.size; ++r) keys.push_back(rank_key(r));
  if (Status arrived = store.wait(keys, left()); !arrived.is_ok()) {
    if (arrived.code() != StatusCode::kTimeout) return arrived;
    return timeout_error("rank " + rank + " waited " + std::to_string(exchange.timeout.count()) +
                         " ms for the group of " + std::to_string(exchange.size) + " to form; missing rank(s) " +
                         missing_ranks(store, keys) + " (did they start? do they use the same EDT_COORDINATOR?)");
  }
  std::vector<std::string> blobs;
  for (const auto& key : keys) {
    EDT_ASSIGN_OR_RETURN(std::string blob, store.get(key, left()));
    blobs.push_back(std::move(blob));
  }
  return blobs;
}

}  // namespace edt::rendezvous
