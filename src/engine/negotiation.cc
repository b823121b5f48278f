#include "engine/negotiation.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace edt::engine {

const Meta& Ready::first() const {
  for (const auto& m : metas) {
    if (m) return *m;
  }
  EDT_CHECK_MSG(false, "a ready name without any announcement");
}

namespace {

// Message layout: u8 flags (1 join, 2 shut down), u32 count, then per entry
// u8 kind: 0 = full (string name, meta), 1 = cached (u32 cache id).
constexpr uint8_t kFlagJoin = 1;
constexpr uint8_t kFlagShutDown = 2;
constexpr uint8_t kEntryFull = 0;
constexpr uint8_t kEntryCached = 1;

class Writer {
 public:
  template <typename T>
  void put(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  void put_vector(const std::vector<int64_t>& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) put(x);
  }
  void put_meta(const Meta& m) {
    put(m.type);
    put(m.dtype);
    put(m.op);
    put(m.root);
    put(m.prescale);
    put(m.postscale);
    put_vector(m.shape);
    put_vector(m.splits);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  bool get(T* v) {
    if (in_.size() < sizeof(T)) return false;
    std::memcpy(v, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return true;
  }
  bool get_string(std::string* s) {
    uint32_t n;
    if (!get(&n) || in_.size() < n) return false;
    s->assign(in_.substr(0, n));
    in_.remove_prefix(n);
    return true;
  }
  bool get_vector(std::vector<int64_t>* v) {
    uint32_t n;
    if (!get(&n) || in_.size() / sizeof(int64_t) < n) return false;
    v->resize(n);
    for (auto& x : *v) get(&x);
    return true;
  }
  bool get_meta(Meta* m) {
    return get(&m->type) && get(&m->dtype) && get(&m->op) && get(&m->root) && get(&m->prescale) &&
           get(&m->postscale) && get_vector(&m->shape) && get_vector(&m->splits);
  }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

std::string format_factor(double f) {
  std::ostringstream s;
  s << f;
  return s.str();
}

// Horovod's sentence for the first difference between two announcements of
// one name, or "" when they agree.
std::string describe_mismatch(const Meta& a, const Meta& b) {
  std::ostringstream s;
  if (a.type != b.type) {
    s << "Mismatched operations: One rank did an " << op_type_name(a.type) << ", but another rank did an "
      << op_type_name(b.type) << ".";
  } else if (a.dtype != b.dtype) {
    s << "Mismatched data types: One rank had type " << dtype_name(a.dtype) << ", but another rank had type "
      << dtype_name(b.dtype) << ".";
  } else if ((a.type == OpType::kAllreduce || a.type == OpType::kReducescatter) && a.op != b.op) {
    s << "Mismatched reduction operations: One rank did an op " << op_name(a.op)
      << ", but another rank did an op " << op_name(b.op) << ".";
  } else if ((a.type == OpType::kAllreduce || a.type == OpType::kReducescatter) && a.prescale != b.prescale) {
    s << "Mismatched prescale factors: One rank sent factor " << format_factor(a.prescale)
      << ", but another rank sent factor " << format_factor(b.prescale) << ".";
  } else if ((a.type == OpType::kAllreduce || a.type == OpType::kReducescatter) && a.postscale != b.postscale) {
    s << "Mismatched postscale factors: One rank sent factor " << format_factor(a.postscale)
      << ", but another rank sent factor " << format_factor(b.postscale) << ".";
  } else if ((a.type == OpType::kAllreduce || a.type == OpType::kBroadcast ||
              a.type == OpType::kReducescatter) && a.shape != b.shape) {
    s << "Mismatched " << op_type_name(a.type) << " tensor shapes: One rank sent a tensor of shape "
      << shape_string(a.shape) << ", but another rank sent a tensor of shape " << shape_string(b.shape) << ".";
  } else if (a.type == OpType::kBroadcast && a.root != b.root) {
    s << "Mismatched broadcast root ranks: One rank specified root rank " << a.root
      << ", but another rank specified root rank " << b.root << ".";
  } else if (a.type == OpType::kAllgather || a.type == OpType::kAlltoall) {
    if (a.shape.size() != b.shape.size()) {
      s << "Mismatched " << op_type_name(a.type) << " tensor shapes: One rank sent a tensor of rank "
        << a.shape.size() << ", but another rank sent a tensor of rank " << b.shape.size() << ".";
    } else {
      for (size_t d = 1; d < a.shape.size(); ++d) {
        if (a.shape[d] != b.shape[d]) {
          s << "Mismatched " << op_type_name(a.type) << " tensor shapes: One rank sent a tensor with dimension "
            << d << " equal to " << a.shape[d] << ", but another rank sent a tensor with dimension " << d
            << " equal to " << b.shape[d] << ".";
          break;
        }
      }
    }
  }
  return s.str();
}

}  // namespace

Negotiator::Negotiator(int size, size_t cache_capacity)
    : size_(size), cache_capacity_(cache_capacity), joined_(size), shut_down_(size) {}

std::string Negotiator::encode(const std::vector<Announcement>& announcements, bool join, bool shut_down) const {
  Writer w;
  w.put<uint8_t>((join ? kFlagJoin : 0) | (shut_down ? kFlagShutDown : 0));
  w.put<uint32_t>(static_cast<uint32_t>(announcements.size()));
  for (const auto& a : announcements) {
    auto it = cache_ids_.find(a.name);
    if (it != cache_ids_.end() && a.meta.type != OpType::kAlltoall && cache_[it->second].second == a.meta) {
      w.put(kEntryCached);
      w.put<uint32_t>(it->second);
    } else {
      w.put(kEntryFull);
      w.put_string(a.name);
      w.put_meta(a.meta);
    }
  }
  return w.take();
}

bool Negotiator::complete(const Pending& pending) const {
  for (int r = 0; r < size_; ++r) {
    if (!pending.metas[r] && !joined_[r]) return false;
  }
  return true;
}

bool Negotiator::refused_while_joined(const Pending& pending) const {
  if (std::find(joined_.begin(), joined_.end(), true) == joined_.end()) return false;
  for (const auto& m : pending.metas)
    if (m) return m->type != OpType::kAllreduce;
  return false;
}

void Negotiator::add(int rank, std::string name, Meta meta, std::vector<Ready>* ready) {
  auto [it, inserted] = pending_.try_emplace(name);
  Pending& p = it->second;
  if (inserted) {
    p.metas.resize(size_);
    pending_order_.push_back(name);
  }
  p.metas[rank] = std::move(meta);
  ++p.count;
  if (complete(p) || refused_while_joined(p)) {
    Pending done = std::move(p);
    pending_.erase(it);
    pending_order_.erase(std::find(pending_order_.begin(), pending_order_.end(), name));
    ready->push_back(make_ready(std::move(name), std::move(done)));
  }
}

std::string Negotiator::check(const Ready& ready) const {
  int first_rank = -1;
  for (int r = 0; r < size_; ++r) {
    const auto& m = ready.metas[r];
    if (!m) continue;
    if (first_rank < 0) {
      first_rank = r;
      if (m->type == OpType::kAllgather && m->shape.empty()) {
        return "Rank zero tried to allgather a rank-zero tensor. (tensor '" + ready.name + "', rank " +
               std::to_string(r) + ")";
      }
      continue;
    }
    std::string what = describe_mismatch(*ready.metas[first_rank], *m);
    if (!what.empty()) {
      return what + " (tensor '" + ready.name + "': rank " + std::to_string(first_rank) + " and rank " +
             std::to_string(r) + ")";
    }
  }
  const Meta& m = ready.first();
  bool someone_joined = std::find(joined_.begin(), joined_.end(), true) != joined_.end();
  if (someone_joined && m.type != OpType::kAllreduce) {
    std::string ranks;
    for (int r = 0; r < size_; ++r) {
      if (joined_[r]) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    }
    return std::string(op_type_name(m.type)) + " of tensor '" + ready.name + "' while rank(s) " + ranks +
           " have joined: only allreduce runs with joined ranks; call it before join().";
  }
  return "";
}

Ready Negotiator::make_ready(std::string name, Pending pending) {
  Ready ready{std::move(name), std::move(pending.metas), ""};
  ready.error = check(ready);
  const Meta& m = ready.first();
  if (ready.error.empty() && m.type != OpType::kAlltoall) {
    auto it = cache_ids_.find(ready.name);
    if (it != cache_ids_.end()) {
      cache_[it->second].second = m;
    } else if (cache_.size() < cache_capacity_) {
      cache_ids_.emplace(ready.name, static_cast<uint32_t>(cache_.size()));
      cache_.emplace_back(ready.name, m);
    }
  }
  return ready;
}

Result<CycleOutcome> Negotiator::decode(const std::vector<std::string_view>& messages) {
  if (static_cast<int>(messages.size()) != size_) return internal_error("negotiation: wrong number of messages");
  CycleOutcome out;
  int last_joiner = -1;
  for (int r = 0; r < size_; ++r) {
    if (messages[r].empty()) continue;  // nothing new from this rank
    Reader in(messages[r]);
    uint8_t flags;
    uint32_t count;
    if (!in.get(&flags) || !in.get(&count)) {
      return internal_error("negotiation: truncated message from rank " + std::to_string(r));
    }
    for (uint32_t i = 0; i < count; ++i) {
      uint8_t kind;
      if (!in.get(&kind)) return internal_error("negotiation: truncated entry from rank " + std::to_string(r));
      std::string name;
      Meta meta;
      if (kind == kEntryCached) {
        uint32_t id;
        if (!in.get(&id) || id >= cache_.size()) {
          return internal_error("negotiation: bad cache id from rank " + std::to_string(r));
        }
        name = cache_[id].first;
        meta = cache_[id].second;
      } else if (kind != kEntryFull || !in.get_string(&name) || !in.get_meta(&meta)) {
        return internal_error("negotiation: malformed entry from rank " + std::to_string(r));
      }
      add(r, std::move(name), std::move(meta), &out.ready);
    }
    if (!in.done()) return internal_error("negotiation: trailing bytes from rank " + std::to_string(r));
    if ((flags & kFlagJoin) && !joined_[r]) {
      joined_[r] = true;
      last_joiner = r;
    }
    if (flags & kFlagShutDown) shut_down_[r] = true;
  }
  if (last_joiner >= 0) {
    // A join can complete names every remaining rank already announced,
    // and refuses the names that cannot run with a joined rank.
    for (size_t i = 0; i < pending_order_.size();) {
      auto it = pending_.find(pending_order_[i]);
      if (complete(it->second) || refused_while_joined(it->second)) {
        std::string name = pending_order_[i];
        Pending done = std::move(it->second);
        pending_.erase(it);
        pending_order_.erase(pending_order_.begin() + static_cast<std::ptrdiff_t>(i));
        out.ready.push_back(make_ready(std::move(name), std::move(done)));
      } else {
        ++i;
      }
    }
  }
  auto gone = std::find(shut_down_.begin(), shut_down_.end(), true);
  if (gone != shut_down_.end()) {
    // A rank that shut down announces nothing more: what waits for it fails.
    int r = static_cast<int>(gone - shut_down_.begin());
    for (const auto& name : pending_order_) {
      Ready failed{name, std::move(pending_[name].metas), ""};
      failed.error = "rank " + std::to_string(r) + " has shut down, so '" + name +
                     "' cannot complete; every rank must submit it before shutdown()";
      out.ready.push_back(std::move(failed));
    }
    pending_.clear();
    pending_order_.clear();
  }
  if (std::all_of(joined_.begin(), joined_.end(), [](bool j) { return j; })) {
    out.join_completed_by = last_joiner;
    std::fill(joined_.begin(), joined_.end(), false);
  }
  if (gone != shut_down_.end()) out.shut_down_by = static_cast<int>(gone - shut_down_.begin());
  out.anything_pending = !pending_.empty();
  return out;
}

bool Negotiator::waits_for(int rank) const {
  if (joined_[rank]) return false;
  return std::any_of(pending_.begin(), pending_.end(), [&](const auto& p) { return !p.second.metas[rank]; });
}

std::vector<int> Negotiator::missing_ranks(const std::string& name) const {
  std::vector<int> missing;
  auto it = pending_.find(name);
  if (it == pending_.end()) return missing;
  for (int r = 0; r < size_; ++r) {
    if (!it->second.metas[r] && !joined_[r]) missing.push_back(r);
  }
  return missing;
}

}  // namespace edt::engine
