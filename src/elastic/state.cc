// State and run(): the worker side of elastic training.
//
// A reset (joining a generation) goes:
//   1. join: wait for a generation newer than ours that lists this worker;
//   2. agree: every member announces its last commit id and waits for all;
//   3. form the generation's communicator under its own store prefix;
//   4. sync: the members with the newest commit (the holders) each send a
//      slice of it to every other member, over connections of their own,
//      all at once (transfer.h), or, when receivers outnumber holders (a
//      job's start), the first holder broadcasts it; a receiver
//      deserializes and commits it;
//   5. on_reset of every StateObject, then the user's callbacks.
// A failure in 2-4 reports the generation broken and starts over at 1; the
// coordinator forms the next generation without whoever failed.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <mutex>
#include <utility>

#include "edt/elastic.h"
#include "edt/tcp_store.h"
#include "common/units.h"
#include "elastic/membership.h"
#include "elastic/transfer.h"

namespace edt::elastic {
namespace {

constexpr char kLeftTheJob[] = "left the job";
// A holder's entry in the allgather of addresses: its "host:port" (a DNS
// name is at most 253 bytes), a NUL, and in the last 8 bytes a random
// number. The transfer's nonce is those numbers XORed over the holders, so
// only members of this generation (who saw the allgather) can ask a holder
// for the state.
constexpr size_t kAddressBytes = 272;
constexpr size_t kSecretAt = kAddressBytes - sizeof(uint64_t);

// Where a receiver's state arrives: fresh anonymous memory in huge pages
// where the kernel allows (a state of gigabytes in 4 KiB pages costs a page
// fault every 4 KiB, a good part of the transfer's time on loopback), not
// zero-filled first (the transfer writes every byte). Shared: an object
// may read its values in place and keep the buffer (deserialize_shared).
class ReceiveBuffer {
 public:
  static Result<std::shared_ptr<ReceiveBuffer>> make(size_t size) {
    if (size == 0) return std::shared_ptr<ReceiveBuffer>(new ReceiveBuffer(nullptr, 0));
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return io_error("mmap of " + std::to_string(size) + " bytes for the state", errno);
    (void)::madvise(p, size, MADV_HUGEPAGE);  // a hint; without it the pages are small
    return std::shared_ptr<ReceiveBuffer>(new ReceiveBuffer(static_cast<char*>(p), size));
  }
  ReceiveBuffer(const ReceiveBuffer&) = delete;
  ReceiveBuffer& operator=(const ReceiveBuffer&) = delete;
  ~ReceiveBuffer() {
    if (data_) ::munmap(data_, size_);
  }
  char* get() const { return data_; }

 private:
  ReceiveBuffer(char* data, size_t size) : data_(data), size_(size) {}
  char* data_;
  size_t size_;
};

// Who sends the state in a reset and who receives it: the holders have the
// newest commit (they all hold the same bytes); the others receive. With no
// commit anywhere, rank 0 alone holds: its initial state becomes everyone's.
struct Roles {
  int64_t newest = 0;
  std::vector<int> holders;
  std::vector<int> receivers;
};

Roles roles_of(const std::vector<int64_t>& commit_ids) {
  Roles roles;
  roles.newest = *std::max_element(commit_ids.begin(), commit_ids.end());
  for (int r = 0; r < static_cast<int>(commit_ids.size()); ++r) {
    const bool holds = roles.newest > 0 ? commit_ids[static_cast<size_t>(r)] == roles.newest : r == 0;
    (holds ? roles.holders : roles.receivers).push_back(r);
  }
  return roles;
}

bool is_collective_failure(StatusCode code) {
  return code == StatusCode::kPeerFailed || code == StatusCode::kTimeout || code == StatusCode::kAborted;
}

// Whether rank 0 saw a new generation, the same answer on every rank.
Result<bool> agree_hosts_updated(Communicator& c, bool seen) {
  int32_t updated = seen ? 1 : 0;
  EDT_RETURN_IF_ERROR(c.broadcast(&updated, 1, DataType::kInt32, 0));
  return updated != 0;
}

Status hosts_updated(int64_t generation) {
  return Status(StatusCode::kHostsUpdated, "the membership changed after generation " + std::to_string(generation) +
                                               "; the state is committed");
}

}  // namespace

struct State::Impl {
  StateOptions options;
  std::shared_ptr<MembershipClient> membership;
  std::vector<std::pair<std::string, StateObject*>> objects;
  std::vector<std::function<void()>> callbacks;
  // Per object, as of the last commit: its bytes, or nothing when the
  // object keeps the committed copy itself (kept_by_object).
  std::vector<std::string> committed;
  std::vector<bool> kept_by_object;
  bool has_snapshot = false;
  int64_t commit_id = 0;
  int resets = -1;  // the first generation is not a reset
  TransferStats transfer;  // of the last reset

  std::mutex comm_mu;
  std::shared_ptr<Communicator> comm;  // guarded by comm_mu (for the abort from the watcher)
  int64_t generation = 0;              // of comm; guarded by comm_mu
  Generation joined;                   // the generation of comm, or the one placement() waited for

  // Commits object i's current value: its own copy, or `bytes` when given
  // (what it was just loaded from), or serialize()'s.
  void keep(size_t i, const std::string_view* bytes = nullptr) {
    StateObject* object = objects[i].second;
    kept_by_object[i] = object->commit();
    if (kept_by_object[i]) {
      committed[i].clear();
    } else {
      committed[i] = bytes ? std::string(*bytes) : object->serialize();
    }
  }

  void snapshot(const std::vector<std::string_view>* loaded = nullptr) {
    committed.resize(objects.size());
    kept_by_object.resize(objects.size());
    for (size_t i = 0; i < objects.size(); ++i) keep(i, loaded ? &(*loaded)[i] : nullptr);
    has_snapshot = true;
  }

  // `owner` keeps `bytes` alive for objects that keep them.
  Status load(const std::vector<std::string_view>& bytes, const std::shared_ptr<const void>& owner) {
    for (size_t i = 0; i < objects.size(); ++i) {
      Status s = objects[i].second->deserialize_shared(owner, bytes[i]);
      if (!s.is_ok()) return s.with_context("state object '" + objects[i].first + "'");
    }
    return Status::ok();
  }

  Status restore() {
    if (!has_snapshot) return Status::ok();  // nothing committed: the state is as it started
    for (size_t i = 0; i < objects.size(); ++i) {
      StateObject* object = objects[i].second;
      Status s = kept_by_object[i] ? object->restore() : object->deserialize(committed[i]);
      if (!s.is_ok()) return s.with_context("state object '" + objects[i].first + "'");
    }
    return Status::ok();
  }

  // The committed bytes of every object, as the pieces they are kept in
  // (no copy where an object lends its own); sizes[i] is object i's.
  // `owned` keeps the bytes of objects that only make a copy.
  Pieces committed_pieces(std::vector<std::string>& owned, std::vector<int64_t>& sizes) const {
    Pieces pieces;
    owned.reserve(objects.size());  // pieces point into it: no reallocation
    for (size_t i = 0; i < objects.size(); ++i) {
      Pieces lent{committed[i]};
      if (kept_by_object[i]) {
        lent = objects[i].second->committed_views();
        if (lent.empty()) lent = {owned.emplace_back(objects[i].second->committed_bytes())};
      }
      sizes[i] = 0;
      for (std::string_view piece : lent) sizes[i] += static_cast<int64_t>(piece.size());
      pieces.insert(pieces.end(), lent.begin(), lent.end());
    }
    return pieces;
  }

  // Loads and commits the state that arrived in `all` (object i's bytes
  // are the next sizes[i]), as commit `newest`.
  Status take(const std::shared_ptr<ReceiveBuffer>& all, const std::vector<int64_t>& sizes, int64_t newest) {
    std::vector<std::string_view> received;
    size_t at = 0;
    for (int64_t n : sizes) {
      received.emplace_back(all->get() + at, static_cast<size_t>(n));
      at += static_cast<size_t>(n);
    }
    EDT_RETURN_IF_ERROR(load(received, all));
    snapshot(&received);
    commit_id = newest;
    return Status::ok();
  }

  static size_t total_of(const std::vector<int64_t>& sizes) {
    size_t total = 0;
    for (int64_t n : sizes) total += static_cast<size_t>(n);
    return total;
  }

  // Step 4 by slices: every holder serves its slice to every receiver.
  Status by_slices(Communicator& c, int64_t gen, const Roles& roles, const Pieces& pieces,
                   const std::vector<int64_t>& sizes) {
    const bool holds = std::count(roles.holders.begin(), roles.holders.end(), c.rank()) > 0;
    std::unique_ptr<SliceServer> server;
    std::vector<char> addresses(kAddressBytes * static_cast<size_t>(c.size()));
    std::vector<char> mine(kAddressBytes);
    if (holds) {
      EDT_ASSIGN_OR_RETURN(server, SliceServer::open(options.host));
      if (server->address().size() >= kSecretAt)
        return Status(StatusCode::kInvalidArgument, "EDT_HOSTNAME",
                      "the state transfer's address " + server->address() + " is longer than " +
                          std::to_string(kSecretAt - 1) + " bytes",
                      "give the worker a shorter host name or an IP address");
      server->address().copy(mine.data(), kSecretAt - 1);
      std::random_device random;
      const uint64_t secret = (uint64_t{random()} << 32) | random();
      std::memcpy(mine.data() + kSecretAt, &secret, sizeof secret);
    }
    EDT_RETURN_IF_ERROR(c.allgather(mine.data(), addresses.data(), kAddressBytes, DataType::kUInt8));
    uint64_t nonce = 0;
    for (int h : roles.holders) {
      uint64_t secret = 0;
      std::memcpy(&secret, addresses.data() + kAddressBytes * static_cast<size_t>(h) + kSecretAt, sizeof secret);
      nonce ^= secret;
    }
    const TransferControl control{options.collective_timeout, [this, gen] { return membership->newest_seen() > gen; }};
    if (holds) {
      EDT_ASSIGN_OR_RETURN(transfer.bytes_sent,
                           server->serve(pieces, static_cast<int>(roles.receivers.size()), nonce, control));
      return Status::ok();
    }
    std::vector<std::string> holders;
    for (int h : roles.holders) holders.emplace_back(addresses.data() + kAddressBytes * static_cast<size_t>(h));
    const size_t total = total_of(sizes);
    EDT_ASSIGN_OR_RETURN(std::shared_ptr<ReceiveBuffer> all, ReceiveBuffer::make(total));
    std::vector<int64_t> from;
    EDT_RETURN_IF_ERROR(fetch_slices(holders, all->get(), total, nonce, control, &from));
    transfer.bytes_from_rank.assign(static_cast<size_t>(c.size()), 0);
    for (size_t k = 0; k < from.size(); ++k) transfer.bytes_from_rank[static_cast<size_t>(roles.holders[k])] = from[k];
    return take(all, sizes, roles.newest);
  }

  // Step 4 by a broadcast from the first holder, when receivers outnumber
  // holders (a job's start: rank 0 alone holds). The broadcast pipelines
  // through every member, where slices would have each holder send its
  // slice once per receiver. Every other member loads what arrives.
  Status by_broadcast(Communicator& c, const Roles& roles, const Pieces& pieces, const std::vector<int64_t>& sizes) {
    const int root = roles.holders[0];
    // The pieces' sizes first: the root's objects may lend theirs in
    // several pieces, each broadcast on its own.
    int64_t count = static_cast<int64_t>(pieces.size());
    EDT_RETURN_IF_ERROR(c.broadcast(&count, 1, DataType::kInt64, root));
    std::vector<int64_t> lengths(static_cast<size_t>(count));
    if (c.rank() == root)
      for (size_t k = 0; k < pieces.size(); ++k) lengths[k] = static_cast<int64_t>(pieces[k].size());
    if (count > 0) EDT_RETURN_IF_ERROR(c.broadcast(lengths.data(), lengths.size(), DataType::kInt64, root));
    if (c.rank() == root) {
      // The root's buffer is only read.
      for (std::string_view p : pieces)
        if (!p.empty()) EDT_RETURN_IF_ERROR(c.broadcast(const_cast<char*>(p.data()), p.size(), DataType::kUInt8, root));
      transfer.bytes_sent = static_cast<int64_t>(total_of(sizes));
      return Status::ok();
    }
    const size_t total = total_of(sizes);
    if (total_of(lengths) != total)
      return internal_error("the state's pieces add up to " + std::to_string(total_of(lengths)) +
                            " bytes, its objects to " + std::to_string(total));
    EDT_ASSIGN_OR_RETURN(std::shared_ptr<ReceiveBuffer> all, ReceiveBuffer::make(total));
    size_t at = 0;
    for (int64_t n : lengths) {
      if (n > 0) EDT_RETURN_IF_ERROR(c.broadcast(all->get() + at, static_cast<size_t>(n), DataType::kUInt8, root));
      at += static_cast<size_t>(n);
    }
    transfer.bytes_from_rank.assign(static_cast<size_t>(c.size()), 0);
    transfer.bytes_from_rank[static_cast<size_t>(root)] = static_cast<int64_t>(total);
    return take(all, sizes, roles.newest);
  }

  // Step 4: the holders of the newest commit send it to every other
  // member; nothing moves when all hold it.
  Status sync(Communicator& c, int64_t gen) {
    if (!has_snapshot) snapshot();
    transfer = {};
    std::vector<int64_t> ids(static_cast<size_t>(c.size()));
    EDT_RETURN_IF_ERROR(c.allgather(&commit_id, ids.data(), 1, DataType::kInt64));
    const Roles roles = roles_of(ids);
    if (roles.receivers.empty()) return Status::ok();
    const bool broadcast = roles.receivers.size() > roles.holders.size();
    const bool holds = std::count(roles.holders.begin(), roles.holders.end(), c.rank()) > 0;
    const bool sends = broadcast ? c.rank() == roles.holders[0] : holds;
    std::vector<std::string> owned;
    std::vector<int64_t> sizes(objects.size());
    Pieces pieces;
    if (sends) pieces = committed_pieces(owned, sizes);
    EDT_RETURN_IF_ERROR(c.broadcast(sizes.data(), sizes.size(), DataType::kInt64, roles.holders[0]));
    transfer.commit_id = roles.newest;
    transfer.bytes = static_cast<int64_t>(total_of(sizes));
    const auto started = std::chrono::steady_clock::now();
    Status done = broadcast ? by_broadcast(c, roles, pieces, sizes) : by_slices(c, gen, roles, pieces, sizes);
    transfer.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return done;
  }

  // Steps 1-5.
  Status rejoin() {
    for (;;) {
      int64_t after;
      {
        std::lock_guard lock(comm_mu);
        after = generation;
        if (comm) comm->abort();
        comm.reset();
      }
      EDT_ASSIGN_OR_RETURN(Generation gen, membership->join(after, options.elastic_timeout));
      const int rank = gen.rank_of(options.worker_id);
      const int size = static_cast<int>(gen.members.size());
      auto source = membership->agree_on_source(gen, commit_id, options.elastic_timeout);
      if (!source.is_ok()) {
        if (source.status().code() == StatusCode::kHostsUpdated) continue;
        return source.status();
      }
      CommunicatorOptions copts;
      copts.rank = rank;
      copts.size = size;
      copts.host = options.host;
      copts.transport = options.transport;
      copts.timeout = options.collective_timeout;
      copts.spin = options.spin;
      auto created = Communicator::create(std::make_shared<PrefixStore>(comm_prefix(gen.number), options.store), copts);
      if (!created.is_ok()) {
        const StatusCode code = created.status().code();
        if (!is_collective_failure(code) && code != StatusCode::kUnavailable) return created.status();
        membership->report_broken(gen.number, created.status().to_string());
        std::lock_guard lock(comm_mu);
        generation = gen.number;
        continue;
      }
      {
        std::lock_guard lock(comm_mu);
        comm = created.value();
        generation = gen.number;
      }
      joined = gen;
      // A failure generation announced while this one formed: start over.
      if (membership->newest_seen() > gen.number) continue;
      Status synced = sync(*created.value(), gen.number);
      if (!synced.is_ok()) {
        if (synced.code() == StatusCode::kHostsUpdated) continue;  // a newer generation: join it
        if (!is_collective_failure(synced.code())) return synced;
        membership->report_broken(gen.number, synced.to_string());
        continue;
      }
      ++resets;
      for (const auto& [name, object] : objects) object->on_reset(rank, size);
      for (const auto& callback : callbacks) callback();
      return Status::ok();
    }
  }
};

State::State(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

State::~State() {
  // Stop the watcher before the communicator it might abort goes away.
  impl_->membership.reset();
}

Result<std::unique_ptr<State>> State::create(StateOptions options) {
  if (!options.store) return invalid_argument("StateOptions.store is not set");
  if (!options.watch_store) options.watch_store = options.store;
  auto impl = std::make_unique<Impl>();
  MembershipClientOptions m;
  m.id = options.worker_id;
  m.host = options.host;
  m.heartbeat_interval = options.heartbeat_interval;
  impl->membership = std::make_shared<MembershipClient>(options.store, options.watch_store, m);
  impl->options = std::move(options);
  Impl* raw = impl.get();
  // When a worker failed, a peer may be silent rather than gone: abort the
  // communicator so that a blocked collective returns now.
  impl->membership->on_new_generation([raw](const Generation& gen) {
    if (!gen.failure) return;
    std::lock_guard lock(raw->comm_mu);
    if (raw->comm && raw->generation < gen.number) raw->comm->abort();
  });
  EDT_RETURN_IF_ERROR(impl->membership->start());
  return std::unique_ptr<State>(new State(std::move(impl)));
}

Result<std::unique_ptr<State>> State::from_env() {
  auto env = [](const char* name) -> Result<std::string> {
    const char* v = std::getenv(name);
    if (!v || !*v)
      return invalid_argument(std::string(name) +
                              " is not set; start the program with edtrun in elastic mode (--min-np/--max-np)");
    return std::string(v);
  };
  auto duration = [](const char* name, std::chrono::milliseconds fallback) -> Result<std::chrono::milliseconds> {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    auto d = parse_duration(v);
    if (!d.is_ok()) return d.status().with_context(name);
    return d.value();
  };
  StateOptions options;
  EDT_ASSIGN_OR_RETURN(std::string coordinator, env("EDT_COORDINATOR"));
  EDT_ASSIGN_OR_RETURN(options.worker_id, env("EDT_WORKER_ID"));
  EDT_ASSIGN_OR_RETURN(options.host, env("EDT_HOSTNAME"));
  if (const char* t = std::getenv("EDT_TRANSPORT"); t && *t) options.transport = t;
  EDT_ASSIGN_OR_RETURN(options.collective_timeout, duration("EDT_TIMEOUT", options.collective_timeout));
  EDT_ASSIGN_OR_RETURN(options.elastic_timeout, duration("EDT_ELASTIC_TIMEOUT", options.elastic_timeout));
  EDT_ASSIGN_OR_RETURN(options.spin, spin_from_env());
  EDT_ASSIGN_OR_RETURN(auto store, connect_tcp_store(coordinator));
  EDT_ASSIGN_OR_RETURN(auto watch_store, connect_tcp_store(coordinator));
  options.store = std::make_shared<PrefixStore>("elastic", store);
  options.watch_store = std::make_shared<PrefixStore>("elastic", watch_store);
  return create(std::move(options));
}

void State::add(const std::string& name, StateObject* object) { impl_->objects.emplace_back(name, object); }

void State::on_reset(std::function<void()> callback) { impl_->callbacks.push_back(std::move(callback)); }

Status State::commit() {
  save();
  EDT_ASSIGN_OR_RETURN(bool updated, agree_hosts_updated(comm(), membership_changed()));
  return updated ? hosts_updated(generation()) : Status::ok();
}

void State::save() {
  impl_->snapshot();
  ++impl_->commit_id;
}

bool State::membership_changed() const { return impl_->membership->newest_seen() > generation(); }

Status State::restore() { return impl_->restore(); }

Status State::check_host_updates() {
  EDT_ASSIGN_OR_RETURN(bool updated, agree_hosts_updated(comm(), membership_changed()));
  if (!updated) return Status::ok();
  // Every rank is at the same step: commit it, so that the next generation
  // starts from here, as it does after commit().
  save();
  return hosts_updated(generation());
}

Communicator& State::comm() {
  std::lock_guard lock(impl_->comm_mu);
  EDT_CHECK_MSG(impl_->comm != nullptr, "State::comm() outside run()");
  return *impl_->comm;
}

int State::rank() const {
  std::lock_guard lock(impl_->comm_mu);
  return impl_->comm ? impl_->comm->rank() : -1;
}

int State::size() const {
  std::lock_guard lock(impl_->comm_mu);
  return impl_->comm ? impl_->comm->size() : 0;
}

int64_t State::generation() const {
  std::lock_guard lock(impl_->comm_mu);
  return impl_->generation;
}

int64_t State::commit_id() const { return impl_->commit_id; }

Result<Placement> State::placement() {
  if (impl_->joined.number == 0) {
    EDT_ASSIGN_OR_RETURN(impl_->joined, impl_->membership->join(0, impl_->options.elastic_timeout));
  }
  const Generation& gen = impl_->joined;
  Placement placement{gen.number, gen.rank_of(impl_->options.worker_id), {}};
  for (const auto& member : gen.members) placement.hosts.push_back(member.host);
  return placement;
}
int State::resets() const { return impl_->resets; }

const TransferStats& State::last_transfer() const { return impl_->transfer; }

Status run(State& state, const std::function<Status(State&)>& fn) {
  State::Impl& impl = *state.impl_;
  bool rejoin = true;
  for (;;) {
    if (rejoin) EDT_RETURN_IF_ERROR(impl.rejoin());
    Status status = fn(state);
    if (status.is_ok()) return impl.membership->finish(state.generation());
    if (status.code() == StatusCode::kHostsUpdated) {
      rejoin = true;
      continue;
    }
    if (!is_collective_failure(status.code())) return status;
    // A worker failed: roll back and tell the coordinator (it may already
    // know, from the process exit; the first report of a generation wins).
    impl.membership->report_broken(state.generation(), status.to_string());
    EDT_RETURN_IF_ERROR(state.restore());
    rejoin = true;
  }
}

bool left_the_job(const Status& status) {
  return status.code() == StatusCode::kAborted && status.message().find(kLeftTheJob) != std::string::npos;
}

}  // namespace edt::elastic
