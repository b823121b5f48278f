#include "elastic/membership.h"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace edt::elastic {
namespace {

constexpr char kGenerationKey[] = "generation";
constexpr char kShutdownKey[] = "shutdown";
constexpr char kDoneKey[] = "done";
constexpr char kHostsUpdated[] = "hosts-updated";
constexpr char kFailurePrefix[] = "failure: ";

std::string gen_key(int64_t g, const std::string& leaf) { return "gen/" + std::to_string(g) + "/" + leaf; }

Result<int64_t> parse_int(const std::string& text, const std::string& key) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    return internal_error("store key '" + key + "' holds '" + text + "', not an integer");
  return value;
}

Result<int64_t> newest_generation(Store& store) {
  EDT_ASSIGN_OR_RETURN(auto text, store.try_get(kGenerationKey));
  if (!text) return int64_t{0};
  return parse_int(*text, kGenerationKey);
}

Result<Generation> read_generation(Store& store, int64_t g, Duration timeout = Store::kDefaultTimeout) {
  EDT_ASSIGN_OR_RETURN(std::string text, store.get(gen_key(g, "members"), timeout));
  return Generation::decode(g, text);
}

}  // namespace

int Generation::rank_of(const std::string& id) const {
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].id == id) return static_cast<int>(i);
  return -1;
}

std::string Generation::encode() const {
  // The kind is one line: a failure's reason (a status message, a worker's
  // last words) may span several, which would read back as member lines.
  std::string reason = why;
  std::replace(reason.begin(), reason.end(), '\n', ' ');
  std::string out = failure ? kFailurePrefix + reason : std::string(kHostsUpdated);
  for (const auto& m : members) out += "\n" + m.id + " " + m.host;
  return out;
}

Result<Generation> Generation::decode(int64_t number, const std::string& text) {
  Generation gen;
  gen.number = number;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  if (line.rfind(kFailurePrefix, 0) == 0) {
    gen.failure = true;
    gen.why = line.substr(sizeof(kFailurePrefix) - 1);
  } else if (line != kHostsUpdated) {
    return internal_error("generation " + std::to_string(number) + " has kind '" + line + "'");
  }
  // Each member once, with an id and a host: two workers must never take
  // the same rank.
  std::set<std::string> ids;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() || !ids.insert(line.substr(0, space)).second)
      return internal_error("generation " + std::to_string(number) + " has member line '" + line + "'");
    gen.members.push_back({line.substr(0, space), line.substr(space + 1)});
  }
  return gen;
}

std::string comm_prefix(int64_t generation) { return gen_key(generation, "comm"); }

// ---------------------------------------------------------------------------
// MembershipClient

MembershipClient::MembershipClient(std::shared_ptr<Store> store, std::shared_ptr<Store> watch_store,
                                   MembershipClientOptions options)
    : store_(std::move(store)), watch_store_(std::move(watch_store)), options_(std::move(options)) {}

MembershipClient::~MembershipClient() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

Status MembershipClient::start() {
  const auto& id = options_.id;
  if (id.empty() || id.find_first_of(" \t\n/") != std::string::npos)
    return invalid_argument("elastic worker id '" + id + "' must be non-empty without spaces or '/'");
  EDT_RETURN_IF_ERROR(store_->add("heartbeat/" + id, 1).status());
  EDT_RETURN_IF_ERROR(store_->set("worker/" + id, options_.host));
  EDT_ASSIGN_OR_RETURN(int64_t newest, newest_generation(*store_));
  newest_seen_ = newest;
  watcher_ = std::thread([this] { watch_loop(); });
  return Status::ok();
}

void MembershipClient::on_new_generation(std::function<void(const Generation&)> callback) {
  std::lock_guard lock(mu_);
  callback_ = std::move(callback);
}

// Heartbeats, and between them a blocking wait for the next generation's
// plan, so a new generation is seen as soon as it is published.
void MembershipClient::watch_loop() {
  auto next_beat = Clock::now() + options_.heartbeat_interval;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    const int64_t next = newest_seen_.load() + 1;
    const auto left = std::chrono::duration_cast<Duration>(next_beat - Clock::now());
    // Short slices, so that the destructor does not wait a whole interval.
    const Duration slice = std::clamp(left, Duration(1), Duration(200));
    Status waited = watch_store_->wait({gen_key(next, "members")}, slice);
    if (waited.is_ok()) {
      auto newest = newest_generation(*watch_store_);
      const int64_t g = newest.is_ok() ? std::max(newest.value(), next) : next;
      auto gen = read_generation(*watch_store_, g, Duration(1000));
      if (gen.is_ok()) {
        newest_seen_ = g;
        std::function<void(const Generation&)> callback;
        {
          std::lock_guard lock(mu_);
          callback = callback_;
        }
        if (callback) callback(gen.value());
      }
    } else if (waited.code() != StatusCode::kTimeout) {
      // The store is gone (the launcher ended); the training thread finds
      // out on its next store call. Pace the loop instead of spinning.
      std::unique_lock lock(mu_);
      stop_cv_.wait_for(lock, options_.poll_interval, [&] { return stopping_; });
    }
    if (Clock::now() >= next_beat) {
      (void)watch_store_->add("heartbeat/" + options_.id, 1);
      next_beat = Clock::now() + options_.heartbeat_interval;
    }
  }
}

Status MembershipClient::check_stopped() {
  EDT_ASSIGN_OR_RETURN(auto done, store_->try_get(kDoneKey));
  if (done)
    return aborted("worker " + options_.id + " left the job: the job finished its work (" +
                   "generation and worker: " + *done + ") before this worker joined it");
  EDT_ASSIGN_OR_RETURN(auto shutdown, store_->try_get(kShutdownKey));
  if (shutdown) return aborted("the job is shutting down: " + *shutdown);
  EDT_ASSIGN_OR_RETURN(auto removed, store_->try_get("removed/" + options_.id));
  if (removed) return aborted("worker " + options_.id + " left the job: " + *removed);
  return Status::ok();
}

Result<Generation> MembershipClient::join(int64_t after, Duration timeout) {
  const auto deadline = Clock::now() + timeout;
  int64_t checked = after;  // generations up to this one do not list us
  for (;;) {
    EDT_RETURN_IF_ERROR(check_stopped());
    EDT_ASSIGN_OR_RETURN(int64_t newest, newest_generation(*store_));
    if (newest > checked) {
      EDT_ASSIGN_OR_RETURN(Generation gen, read_generation(*store_, newest));
      if (gen.rank_of(options_.id) >= 0) return gen;
      checked = newest;
    }
    const auto now = Clock::now();
    if (now >= deadline)
      return timeout_error("worker " + options_.id + " waited " + std::to_string(timeout.count()) +
                           " ms for a generation that includes it (newest: " + std::to_string(newest) +
                           "); the launcher did not form one");
    const auto left = std::chrono::duration_cast<Duration>(deadline - now);
    Status waited = store_->wait({gen_key(checked + 1, "members")}, std::min(left, options_.poll_interval));
    if (!waited.is_ok() && waited.code() != StatusCode::kTimeout) return waited;
  }
}

Result<StateSource> MembershipClient::agree_on_source(const Generation& gen, int64_t commit_id,
                                                      Duration timeout) {
  EDT_RETURN_IF_ERROR(store_->set(gen_key(gen.number, "commit/" + options_.id), std::to_string(commit_id)));
  std::vector<std::string> keys;
  for (const auto& m : gen.members) keys.push_back(gen_key(gen.number, "commit/" + m.id));
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    Status waited = store_->wait(keys, options_.poll_interval);
    if (waited.is_ok()) break;
    if (waited.code() != StatusCode::kTimeout) return waited;
    EDT_ASSIGN_OR_RETURN(int64_t newest, newest_generation(*store_));
    if (newest > gen.number)
      return Status(StatusCode::kHostsUpdated, "generation " + std::to_string(gen.number) +
                                                   " was replaced by " + std::to_string(newest) + " while forming");
    EDT_RETURN_IF_ERROR(check_stopped());
    if (Clock::now() >= deadline) {
      std::string missing;
      for (size_t i = 0; i < keys.size(); ++i) {
        EDT_ASSIGN_OR_RETURN(auto v, store_->try_get(keys[i]));
        if (!v) missing += (missing.empty() ? "" : ", ") + gen.members[i].id + " on " + gen.members[i].host;
      }
      return timeout_error("generation " + std::to_string(gen.number) + ": waited " +
                           std::to_string(timeout.count()) + " ms for " + missing + " to arrive");
    }
  }
  StateSource source{0, -1};
  for (size_t i = 0; i < keys.size(); ++i) {
    EDT_ASSIGN_OR_RETURN(std::string text, store_->get(keys[i]));
    EDT_ASSIGN_OR_RETURN(int64_t id, parse_int(text, keys[i]));
    if (id > source.commit_id) source = {static_cast<int>(i), id};
  }
  return source;
}

void MembershipClient::report_broken(int64_t gen, const std::string& why) {
  (void)store_->compare_set(gen_key(gen, "broken"), "", options_.id + ": " + why);
}

Status MembershipClient::finish(int64_t gen) {
  return store_->set(kDoneKey, std::to_string(gen) + " " + options_.id);
}

// ---------------------------------------------------------------------------
// MembershipCoordinator

MembershipCoordinator::MembershipCoordinator(std::shared_ptr<Store> store, CoordinatorOptions options)
    : store_(std::move(store)), options_(options) {}

void MembershipCoordinator::expect(const std::string& id, const std::string& host, int64_t host_order, int slot) {
  workers_[id] = Worker{host, host_order, slot, false, std::nullopt, Clock::now()};
}

void MembershipCoordinator::lost(const std::string& id, const std::string& why) {
  if (!workers_.erase(id)) return;
  if (current_.rank_of(id) >= 0) failures_.push_back(id + ": " + why);
}

void MembershipCoordinator::remove(const std::string& id, const std::string& why) {
  if (!workers_.erase(id)) return;
  (void)store_->set("removed/" + id, why);
  if (current_.rank_of(id) >= 0) member_left_ = true;
}

int MembershipCoordinator::starting() const {
  int n = 0;
  for (const auto& [id, w] : workers_) n += !w.registered;
  return n;
}

bool MembershipCoordinator::registered(const std::string& id) const {
  auto it = workers_.find(id);
  return it != workers_.end() && it->second.registered;
}

Result<PollOutcome> MembershipCoordinator::poll() {
  PollOutcome out;
  EDT_ASSIGN_OR_RETURN(auto done, store_->try_get(kDoneKey));
  if (done) {
    out.done = true;
    return out;
  }
  const auto now = Clock::now();
  std::vector<std::string> silent;
  for (auto& [id, w] : workers_) {
    if (!w.registered) {
      EDT_ASSIGN_OR_RETURN(auto reg, store_->try_get("worker/" + id));
      if (!reg) continue;
      w.registered = true;
      w.heard = now;
    }
    EDT_ASSIGN_OR_RETURN(auto beat, store_->try_get("heartbeat/" + id));
    if (beat != w.heartbeat) {
      w.heartbeat = beat;
      w.heard = now;
    } else if (now - w.heard > options_.heartbeat_timeout) {
      silent.push_back(id);
    }
  }
  for (const auto& id : silent) {
    lost(id, "no heartbeat for " + std::to_string(options_.heartbeat_timeout.count()) + " ms (host silent)");
    out.silent.push_back(id);
  }
  if (current_.number > 0) {
    EDT_ASSIGN_OR_RETURN(auto broken, store_->try_get(gen_key(current_.number, "broken")));
    if (broken && failures_.empty()) failures_.push_back(*broken);
  }

  std::vector<std::pair<std::tuple<int64_t, int, std::string>, MemberInfo>> ready;
  for (const auto& [id, w] : workers_)
    if (w.registered) ready.push_back({{w.host_order, w.slot, id}, {id, w.host}});
  std::sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<MemberInfo> members;
  for (const auto& [key, m] : ready)
    if (static_cast<int>(members.size()) < options_.max_size) members.push_back(m);
  out.ready = static_cast<int>(ready.size());

  const bool failed = !failures_.empty();
  const bool changed = failed || member_left_ || members != current_.members;
  if (!changed) return out;
  // Newcomers alone wait for the others still starting, so that hosts
  // added together make one generation; a failure or a departure does not.
  if (!failed && !member_left_ && starting() > 0 && current_.number > 0) return out;
  if (current_.number == 0 && starting() > 0) return out;
  if (static_cast<int>(members.size()) < options_.min_size) {
    // Below the minimum only if the workers still starting cannot make it
    // up: those are waited for, as for the first generation (Horovod's
    // elastic timeout, too, counts slots, not how fast workers start).
    out.below_min = static_cast<int>(members.size()) + starting() < options_.min_size;
    return out;
  }
  std::string why;
  for (const auto& f : failures_) why += (why.empty() ? "" : "; ") + f;
  EDT_RETURN_IF_ERROR(publish(std::move(members), failed, why));
  out.published = current_;
  return out;
}

Status MembershipCoordinator::publish(std::vector<MemberInfo> members, bool failure, const std::string& why) {
  Generation next;
  next.number = current_.number + 1;
  next.failure = failure;
  next.why = why;
  next.members = std::move(members);
  EDT_RETURN_IF_ERROR(store_->set(gen_key(next.number, "members"), next.encode()));
  EDT_RETURN_IF_ERROR(store_->set(kGenerationKey, std::to_string(next.number)));
  current_ = std::move(next);
  failures_.clear();
  member_left_ = false;
  return Status::ok();
}

Status MembershipCoordinator::shutdown(const std::string& why) { return store_->set(kShutdownKey, why); }

}  // namespace edt::elastic
