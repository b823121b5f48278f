// State and run(): the worker side of elastic training.
//
// A reset (joining a generation) goes:
//   1. join: wait for a generation newer than ours that lists this worker;
//   2. agree: every member announces its last commit id; the source is the
//      member with the highest (lowest rank on ties);
//   3. form the generation's communicator under its own store prefix;
//   4. sync: the source broadcasts its committed state (a header of sizes,
//      then the bytes), every other member deserializes it and commits it;
//   5. on_reset of every StateObject, then the user's callbacks.
// A failure in 2-4 reports the generation broken and starts over at 1; the
// coordinator forms the next generation without whoever failed.
#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "edt/elastic.h"
#include "edt/tcp_store.h"
#include "common/units.h"
#include "elastic/membership.h"

namespace edt::elastic {
namespace {

constexpr char kLeftTheJob[] = "left the job";

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

  std::mutex comm_mu;
  std::shared_ptr<Communicator> comm;  // guarded by comm_mu (for the abort from the watcher)
  int64_t generation = 0;              // of comm; guarded by comm_mu
  Generation joined;                   // the generation of comm, or the one placement() waited for

  // Commits object i's current value: its own copy, or `bytes` when given
  // (what it was just loaded from), or serialize()'s.
  void keep(size_t i, std::string* bytes = nullptr) {
    StateObject* object = objects[i].second;
    kept_by_object[i] = object->commit();
    if (kept_by_object[i]) {
      committed[i].clear();
    } else {
      committed[i] = bytes ? std::move(*bytes) : object->serialize();
    }
  }

  void snapshot(std::vector<std::string>* loaded = nullptr) {
    committed.resize(objects.size());
    kept_by_object.resize(objects.size());
    for (size_t i = 0; i < objects.size(); ++i) keep(i, loaded ? &(*loaded)[i] : nullptr);
    has_snapshot = true;
  }

  Status load(const std::vector<std::string>& bytes) {
    for (size_t i = 0; i < objects.size(); ++i) {
      Status s = objects[i].second->deserialize(bytes[i]);
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

  // The committed bytes of every object, in one buffer; sizes[i] is object i's.
  std::string committed_bytes(std::vector<int64_t>& sizes) const {
    std::string all;
    for (size_t i = 0; i < objects.size(); ++i) {
      const size_t at = all.size();
      if (kept_by_object[i]) {
        std::string bytes = objects[i].second->committed_bytes();
        if (all.empty()) {
          all = std::move(bytes);  // a state of one object (Python's): no second copy
        } else {
          all += bytes;
        }
      } else {
        all += committed[i];
      }
      sizes[i] = static_cast<int64_t>(all.size() - at);
    }
    return all;
  }

  // Step 4: the source's committed bytes to every member.
  Status sync(Communicator& c, int source) {
    if (!has_snapshot) snapshot();
    std::vector<int64_t> header(objects.size() + 1);
    header[0] = commit_id;
    std::vector<int64_t> sizes(objects.size());
    std::string all;
    if (c.rank() == source) {
      all = committed_bytes(sizes);
      std::copy(sizes.begin(), sizes.end(), header.begin() + 1);
    }
    EDT_RETURN_IF_ERROR(c.broadcast(header.data(), header.size(), DataType::kInt64, source));
    if (c.rank() != source) {
      size_t total = 0;
      for (size_t i = 1; i < header.size(); ++i) total += static_cast<size_t>(header[i]);
      all.resize(total);
    }
    EDT_RETURN_IF_ERROR(c.broadcast(all.data(), all.size(), DataType::kUInt8, source));
    if (c.rank() == source) return Status::ok();
    std::vector<std::string> received;
    size_t at = 0;
    for (size_t i = 1; i + 1 < header.size(); ++i) {
      received.push_back(all.substr(at, static_cast<size_t>(header[i])));
      at += static_cast<size_t>(header[i]);
    }
    if (header.size() > 1) {
      all.erase(0, at);  // the last object keeps the buffer: one object's state is not copied again
      received.push_back(std::move(all));
    }
    EDT_RETURN_IF_ERROR(load(received));
    snapshot(&received);
    commit_id = header[0];
    return Status::ok();
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
      Status synced = sync(*created.value(), source->rank);
      if (!synced.is_ok()) {
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
