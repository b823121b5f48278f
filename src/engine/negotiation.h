// Negotiation: how ranks agree which named requests to run, and in which
// order, without a coordinator.
//
// Every cycle each rank announces the requests submitted since its last
// cycle and the engine allgathers the announcements. Every rank then feeds
// the same bytes, in rank order, to its Negotiator, so every Negotiator
// holds the same table and takes the same decisions: a name is ready once
// every rank that has not joined announced it, and ready names run in the
// order in which they became ready. That order is the same on every rank
// even when the ranks submitted in different orders.
//
// A ready name whose announcements disagree (operation, dtype, shape, reduce
// op, root, scale factors) is ready with an error, worded as Horovod words
// it and naming both ranks; every rank reports it to its caller.
//
// Join: while some rank has joined, only allreduce runs (the joined rank
// takes part with zeros), as in Horovod. Any other name is ready with an error
// as soon as it is announced, or when the join arrives, without waiting for
// the other ranks: they may never announce it under the same name (ranks
// that skipped a collective number their unnamed requests differently), and
// waiting would hang every rank.
//
// Response cache: a name that completed once with identical announcements
// gets a cache id, the same on every rank because it is assigned while
// decoding the shared bytes. Announcing a cached name with the same
// metadata costs five bytes instead of its name and shape, and decoding it
// is a lookup.
//
// Not thread-safe: the engine's background thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "edt/status.h"
#include "engine/request.h"

namespace edt::engine {

struct Announcement {
  std::string name;
  Meta meta;
};

// A name every rank agreed on (or disagreed about: `error` is set).
struct Ready {
  std::string name;
  std::vector<std::optional<Meta>> metas;  // per rank; nullopt for a rank that has joined
  std::string error;

  // The announcement of the lowest rank that made one.
  const Meta& first() const;
};

struct CycleOutcome {
  std::vector<Ready> ready;
  // Set on the cycle in which the last rank joined: the rank that joined
  // last (the highest of those joining in that cycle). Joins then reset.
  std::optional<int> join_completed_by;
  // The lowest rank that has announced its shutdown, if any: that cycle is
  // the last of every rank (see Engine::shutdown).
  std::optional<int> shut_down_by;
  bool anything_pending = false;  // names still waiting for some rank
};

class Negotiator {
 public:
  Negotiator(int size, size_t cache_capacity);

  // This rank's message for the cycle.
  std::string encode(const std::vector<Announcement>& announcements, bool join, bool shut_down) const;

  // Applies every rank's message of one cycle (index = rank). Fails only on
  // bytes that do not decode, which is a bug in edt.
  Result<CycleOutcome> decode(const std::vector<std::string_view>& messages);

  size_t cache_size() const { return cache_.size(); }
  bool joined(int rank) const { return joined_[rank]; }

  // Ranks that have not announced `name` yet, for stall reports; empty when
  // the name is not pending.
  std::vector<int> missing_ranks(const std::string& name) const;
  std::vector<std::string> pending_names() const { return pending_order_; }
  bool has_pending() const { return !pending_order_.empty(); }
  // Whether some pending name still waits for `rank` to announce it.
  bool waits_for(int rank) const;

 private:
  struct Pending {
    std::vector<std::optional<Meta>> metas;
    int count = 0;
  };
  void add(int rank, std::string name, Meta meta, std::vector<Ready>* ready);
  Ready make_ready(std::string name, Pending pending);
  std::string check(const Ready& ready) const;
  bool complete(const Pending& pending) const;
  // An operation other than allreduce while some rank has joined.
  bool refused_while_joined(const Pending& pending) const;

  int size_;
  size_t cache_capacity_;
  std::vector<bool> joined_;
  std::vector<bool> shut_down_;
  std::map<std::string, Pending> pending_;
  std::vector<std::string> pending_order_;  // names in order of first announcement
  std::vector<std::pair<std::string, Meta>> cache_;      // by cache id
  std::unordered_map<std::string, uint32_t> cache_ids_;  // name -> cache id
};

}  // namespace edt::engine
