#include "engine/engine.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <utility>

#include "common/cpu.h"
#include "common/log.h"
#include "common/units.h"
#include "kernels/reduce.h"

namespace edt::engine {

struct Engine::Op {
  int64_t handle = 0;
  Meta meta;
  void* data = nullptr;
  bool done = false;
  Status status;
  Output output;
};

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// How long a waiting thread yields before it sleeps on the cycle mutex.
constexpr auto kCycleLockSpin = std::chrono::milliseconds(5);

Result<double> parse_number(const char* var, const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || v < 0) {
    return invalid_argument(std::string(var) + "='" + text + "' is not a non-negative number; unset it or give one");
  }
  return v;
}

size_t row_bytes(const Meta& m) {
  int64_t row = 1;
  for (size_t d = 1; d < m.shape.size(); ++d) row *= m.shape[d];
  return static_cast<size_t>(row) * dtype_size(m.dtype);
}

size_t tensor_bytes(const Meta& m) { return static_cast<size_t>(num_elements(m.shape)) * dtype_size(m.dtype); }

// Fusion trades two copies of every byte (into the fusion buffer and back)
// for fewer collectives. From about a megabyte on, the copies cost more than
// the latency of a collective of its own, so such a tensor is reduced alone,
// in its own memory.
constexpr size_t kReducedAloneBytes = size_t{1} << 20;

// The rows of dimension 0 that reducescatter leaves on `rank`: as even as
// possible, the first ranks taking one more when it does not divide.
std::pair<int64_t, int64_t> scatter_rows(int64_t rows, int rank, int size) {
  int64_t base = rows / size, extra = rows % size;
  int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, base + (rank < extra ? 1 : 0)};
}

// What a sum is multiplied by at the end: the postscale factor, and 1/size
// for an average.
double final_scale(const Meta& m, int size) {
  return m.postscale * (m.op == ReduceOp::kAverage ? 1.0 / size : 1.0);
}

// A plain average is the communicator's own (it divides as it reduces);
// with scale factors the allreduce runs as a sum and the division joins the
// postscale factor.
void reduce_scaled(CollectiveBackend& c, void* buf, size_t count, const Meta& m, Status* status) {
  if (m.op == ReduceOp::kAverage && m.prescale == 1.0 && m.postscale == 1.0) {
    *status = c.allreduce(buf, count, m.dtype, m.op);  // the communicator divides without a pass of its own
    return;
  }
  if (m.prescale != 1.0) kernels::scale(buf, count, m.dtype, m.prescale);
  *status = c.allreduce(buf, count, m.dtype, kernels::combining_op(m.op));
  if (!status->is_ok()) return;
  if (double post = final_scale(m, c.size()); post != 1.0) kernels::scale(buf, count, m.dtype, post);
}

Status validate(const std::string& name, const Meta& m, const void* data, int size) {
  auto bad = [&](const std::string& what) {
    return invalid_argument(std::string(op_type_name(m.type)) + " '" + name + "': " + what);
  };
  if (name.empty()) return invalid_argument(std::string(op_type_name(m.type)) + ": the tensor name is empty");
  for (int64_t d : m.shape) {
    if (d < 0) return bad("negative dimension in shape " + shape_string(m.shape));
  }
  if (data == nullptr && m.type != OpType::kBarrier && num_elements(m.shape) > 0) return bad("null buffer");
  if (m.type == OpType::kBroadcast && (m.root < 0 || m.root >= size)) {
    return bad("root rank " + std::to_string(m.root) + " is out of range; the job has ranks 0 to " +
               std::to_string(size - 1));
  }
  if ((m.type == OpType::kAlltoall || m.type == OpType::kReducescatter) && m.shape.empty()) {
    return bad("needs a tensor with at least one dimension");
  }
  if (m.type == OpType::kAlltoall) {
    if (static_cast<int>(m.splits.size()) != size) {
      return bad("splits has " + std::to_string(m.splits.size()) + " entries; it needs one per rank (" +
                 std::to_string(size) + ")");
    }
    int64_t sum = 0;
    for (int64_t s : m.splits) {
      if (s < 0) return bad("splits has a negative entry");
      sum += s;
    }
    if (sum != m.shape[0]) {
      return bad("splits add up to " + std::to_string(sum) + " but the first dimension is " +
                 std::to_string(m.shape[0]));
    }
  }
  return Status::ok();
}

}  // namespace

Result<EngineOptions> engine_options_from_env(int local_processes) {
  EngineOptions o;
  for (const char* var : {"EDT_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD"}) {
    if (const char* v = env(var)) {
      auto bytes = parse_size(v);
      if (!bytes.is_ok()) return bytes.status().with_context(var);
      o.fusion_threshold = *bytes;
      break;
    }
  }
  for (auto [var, field] : {std::pair{"HOROVOD_CYCLE_TIME", &o.cycle_time}, {"EDT_IDLE_CYCLE_TIME", &o.idle_time}}) {
    if (const char* v = env(var)) {
      EDT_ASSIGN_OR_RETURN(double ms, parse_number(var, v));
      *field = std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
    }
  }
  const char* delay = env("EDT_REQUEST_DELAY");
  if (delay && std::string(delay) != "auto") {
    EDT_ASSIGN_OR_RETURN(double ms, parse_number("EDT_REQUEST_DELAY", delay));
    o.request_delay = std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
  } else if (local_processes >= cpu::usable_cores()) {
    o.request_delay = o.idle_time;
  }
  if (const char* v = env("HOROVOD_CACHE_CAPACITY")) {
    EDT_ASSIGN_OR_RETURN(double n, parse_number("HOROVOD_CACHE_CAPACITY", v));
    o.cache_capacity = static_cast<size_t>(n);
  }
  if (const char* v = env("HOROVOD_STALL_CHECK_TIME_SECONDS")) {
    EDT_ASSIGN_OR_RETURN(double s, parse_number("HOROVOD_STALL_CHECK_TIME_SECONDS", v));
    o.stall_warning = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  }
  return o;
}

Engine::Engine(std::unique_ptr<CollectiveBackend> collectives, const EngineOptions& options)
    : collectives_(std::move(collectives)),
      options_(options),
      rank_(collectives_->rank()),
      size_(collectives_->size()),
      negotiator_(size_, options.cache_capacity) {}

Result<std::unique_ptr<Engine>> Engine::start(std::unique_ptr<CollectiveBackend> collectives,
                                              const EngineOptions& options) {
  if (!collectives) return invalid_argument("Engine::start: no collectives");
  std::unique_ptr<Engine> engine(new Engine(std::move(collectives), options));
  engine->thread_ = std::thread([e = engine.get()] { e->loop(); });
  return engine;
}

Engine::~Engine() { (void)shutdown(); }

Result<int64_t> Engine::submit(const std::string& name, const Meta& meta, void* data) {
  EDT_RETURN_IF_ERROR(validate(name, meta, data, size_));
  std::lock_guard lock(mu_);
  if (!broken_.is_ok()) return broken_;
  if (shutdown_asked_ || stopped_ || shut_down_by_ >= 0) return ended_error();
  if (in_flight_.count(name)) {
    return invalid_argument("Requested to " + std::string(op_type_name(meta.type)) +
                            " a tensor with the same name as another tensor that is currently being processed: '" +
                            name + "'. Give each in-flight tensor its own name.");
  }
  auto op = std::make_shared<Op>();
  op->handle = next_handle_++;
  op->meta = meta;
  op->data = data;
  in_flight_.emplace(name, op);
  handles_.emplace(op->handle, op);
  // A request starts a cycle request_delay later (see pause()). Only the
  // first of a batch can bring the thread's deadline forward (it takes the
  // whole queue), and wakes the thread only if it does: with a request
  // delay as long as the idle time the thread sleeps through, a wake-up
  // would cost the busy cores a context switch for nothing.
  const bool first = queue_.empty();
  if (first) first_queued_ = std::chrono::steady_clock::now();
  queue_.emplace_back(name, op);
  if (first && first_queued_ + options_.request_delay < sleeping_until_) wake_.notify_one();
  return op->handle;
}

Result<int64_t> Engine::submit_join() {
  std::lock_guard lock(mu_);
  if (!broken_.is_ok()) return broken_;
  if (shutdown_asked_ || stopped_ || shut_down_by_ >= 0) return ended_error();
  if (join_op_) return failed_precondition("join() is already in progress on this rank");
  join_op_ = std::make_shared<Op>();
  join_op_->handle = next_handle_++;
  handles_.emplace(join_op_->handle, join_op_);
  join_asked_ = true;
  wake_.notify_one();
  return join_op_->handle;
}

Result<bool> Engine::poll(int64_t handle) {
  std::lock_guard lock(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return not_found("no request with handle " + std::to_string(handle) + " is in flight");
  return it->second->done;
}

Status Engine::wait(int64_t handle, Output* output) {
  std::shared_ptr<Op> op;
  {
    std::lock_guard lock(mu_);
    auto it = handles_.find(handle);
    if (it == handles_.end()) return not_found("no request with handle " + std::to_string(handle) + " is in flight");
    op = it->second;
  }
  drive_until_done(*op);
  std::unique_lock lock(mu_);
  finished_.wait(lock, [&] { return op->done; });  // if cycling stopped first, the thread's exit completes it
  handles_.erase(handle);
  if (output) *output = std::move(op->output);
  return op->status;
}

void Engine::drive_until_done(const Op& op) {
  // While the thread runs a cycle, waits for its end: yielding first, as
  // transport waits do, so that the core does not halt for a short cycle.
  std::unique_lock cycling(cycle_mu_, std::defer_lock);
  const auto until = std::chrono::steady_clock::now() + kCycleLockSpin;
  while (!cycling.try_lock()) {
    if (std::chrono::steady_clock::now() >= until) {
      cycling.lock();
      break;
    }
    std::this_thread::yield();
  }
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (op.done) return;
    }
    if (!run_cycle()) return;
  }
}

bool Engine::run_cycle() {
  if (cycling_stopped_) return false;
  bool finished = false;
  Status s = cycle(&finished);
  if (!s.is_ok()) {
    fail_everything(s.with_context("rank " + std::to_string(rank_)));
    finished = true;
  }
  if (!finished) return true;
  cycling_stopped_ = true;
  std::lock_guard lock(mu_);
  next_cycle_ = {};  // a waiting thread ran the last cycle: the thread stops at once
  wake_.notify_one();
  return false;
}

Status Engine::ended_error() const {
  if (shut_down_by_ >= 0 && shut_down_by_ != rank_)
    return failed_precondition("rank " + std::to_string(shut_down_by_) +
                               " has shut down, which ends the collectives of every rank; call init() again");
  return failed_precondition("edt has been shut down; call init() again");
}

bool Engine::ended() {
  std::lock_guard lock(mu_);
  return shut_down_by_ >= 0;
}

Status Engine::shutdown() {
  {
    std::lock_guard lock(mu_);
    shutdown_asked_ = true;
    wake_.notify_one();
  }
  {
    std::lock_guard lock(thread_mu_);
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }
  std::lock_guard lock(mu_);
  return broken_;
}

void Engine::loop() {
  // This thread shares its core with the training: its waits never spin
  // longer than a short wait for a peer about to answer.
  cpu::limit_thread_spin(cpu::kPauseSpin);
  while (true) {
    {
      std::lock_guard cycling(cycle_mu_);
      if (!run_cycle()) break;
    }
    pause();
  }
  std::lock_guard lock(mu_);
  stopped_ = true;
  if (broken_.is_ok()) {
    Status gone = ended_error();
    for (auto& [name, op] : in_flight_) {
      op->done = true;
      op->status = gone;
    }
    in_flight_.clear();
  }
  finished_.notify_all();
}

Status Engine::cycle(bool* finished) {
  std::vector<Announcement> announcements;
  bool join = false, shut_down = false;
  take_announcements(&announcements, &join, &shut_down);
  std::string message;
  if (!announcements.empty() || join || shut_down) message = negotiator_.encode(announcements, join, shut_down);
  EDT_ASSIGN_OR_RETURN(std::optional<CycleOutcome> outcome, exchange(message));
  if (outcome) {
    EDT_RETURN_IF_ERROR(run_ready(outcome->ready));
    if (apply_outcome(*outcome)) {
      *finished = true;
      return Status::ok();
    }
  }
  if (rank_ == 0 && options_.stall_warning.count() > 0) warn_of_stalls();
  schedule_next_cycle();
  return Status::ok();
}

void Engine::take_announcements(std::vector<Announcement>* announcements, bool* join, bool* shut_down) {
  std::lock_guard lock(mu_);
  for (auto& [name, op] : queue_) announcements->push_back({name, op->meta});
  queue_.clear();
  *join = join_asked_ && !join_announced_;
  *shut_down = shutdown_asked_ && !shutdown_announced_;
  join_announced_ |= *join;
  shutdown_announced_ |= *shut_down;
}

Result<std::optional<CycleOutcome>> Engine::exchange(const std::string& message) {
  std::vector<uint64_t> lengths(size_);
  uint64_t length = message.size();
  EDT_RETURN_IF_ERROR(collectives_->allgatherv(&length, lengths.data(), std::vector<size_t>(size_, 8)));
  uint64_t total = std::accumulate(lengths.begin(), lengths.end(), uint64_t{0});
  if (total == 0) return std::optional<CycleOutcome>();
  std::string all(total, '\0');
  EDT_RETURN_IF_ERROR(
      collectives_->allgatherv(message.data(), all.data(), std::vector<size_t>(lengths.begin(), lengths.end())));
  std::vector<std::string_view> messages;
  size_t offset = 0;
  for (uint64_t n : lengths) {
    messages.emplace_back(all.data() + offset, n);
    offset += n;
  }
  EDT_ASSIGN_OR_RETURN(CycleOutcome outcome, negotiator_.decode(messages));
  return std::optional<CycleOutcome>(std::move(outcome));
}

bool Engine::apply_outcome(const CycleOutcome& outcome) {
  std::lock_guard lock(mu_);
  if (outcome.join_completed_by) {
    if (join_op_) {
      join_op_->output.last_joined_rank = *outcome.join_completed_by;
      join_op_->done = true;
      join_op_.reset();
    }
    join_asked_ = false;
    join_announced_ = false;
    finished_.notify_all();
  }
  if (!outcome.shut_down_by) return false;
  shut_down_by_ = *outcome.shut_down_by;
  return true;
}

void Engine::warn_of_stalls() {
  auto now = std::chrono::steady_clock::now();
  std::vector<std::string> pending = negotiator_.pending_names();
  std::erase_if(stall_seen_, [&](const auto& kv) {
    return std::find(pending.begin(), pending.end(), kv.first) == pending.end();
  });
  for (const auto& name : pending) {
    auto [it, inserted] = stall_seen_.try_emplace(name, now);
    if (!inserted && now - it->second > options_.stall_warning) {
      std::string ranks;
      for (int r : negotiator_.missing_ranks(name)) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      log::warn("tensor '{}' was submitted by some ranks but ranks {} have not submitted it for more than {} s; "
                "check that every rank runs the same collectives.",
                name, ranks, options_.stall_warning.count() / 1000);
      it->second = now;  // warn again only after another period
    }
  }
}

void Engine::schedule_next_cycle() {
  // The pause before the next exchange. Every rank decoded the same
  // messages, so all agree on what is pending:
  // - nothing: idle_time. No exchange is needed until some rank submits.
  //   Idle ranks leave the cores to the training.
  // - names that wait for this rank's own requests (or it joined):
  //   cycle_time, as Horovod cycles; the exchange meets ranks that wait.
  // - only names this rank announced, waiting for others: none. It waits
  //   in the next exchange (blocked, not spinning) for the others, so the
  //   request that completes a name is exchanged as soon as it is made
  //   instead of at this rank's next cycle.
  // A request submitted during the pause ends it request_delay later (by
  // default at once: the gradients of a backward pass are reduced while
  // the pass goes on). A thread that waits for a request runs the next
  // cycles itself (see drive_until_done).
  std::chrono::microseconds pause = options_.idle_time;
  if (join_announced_ || negotiator_.waits_for(rank_))
    pause = options_.cycle_time;
  else if (negotiator_.has_pending())
    pause = std::chrono::microseconds::zero();
  std::lock_guard lock(mu_);
  next_cycle_ = std::chrono::steady_clock::now() + pause;
}

void Engine::pause() {
  std::unique_lock lock(mu_);
  while (!(join_asked_ && !join_announced_) && !(shutdown_asked_ && !shutdown_announced_)) {
    // Read again after every wake-up: a waiting thread may have run cycles
    // meanwhile (moving next_cycle_) or taken the queue.
    auto deadline = next_cycle_;
    if (!queue_.empty()) deadline = std::min(deadline, first_queued_ + options_.request_delay);
    if (std::chrono::steady_clock::now() >= deadline) break;
    sleeping_until_ = deadline;
    wake_.wait_until(lock, deadline);
  }
  sleeping_until_ = std::chrono::steady_clock::time_point::min();
}

Status Engine::run_ready(const std::vector<Ready>& ready) {
  // Consecutive allreduces that can share one reduction run fused.
  size_t i = 0;
  while (i < ready.size()) {
    const Ready& r = ready[i];
    if (!r.error.empty()) {
      complete(r.name, invalid_argument(r.error), {});
      ++i;
      continue;
    }
    const Meta& m = r.first();
    if (m.type != OpType::kAllreduce) {
      EDT_RETURN_IF_ERROR(run_one(r));
      ++i;
      continue;
    }
    std::vector<const Ready*> group{&r};
    size_t bytes = tensor_bytes(m);
    size_t j = i + 1;
    for (; j < ready.size() && tensor_bytes(m) < kReducedAloneBytes; ++j) {
      const Ready& n = ready[j];
      if (!n.error.empty()) break;
      const Meta& nm = n.first();
      if (nm.type != OpType::kAllreduce || nm.dtype != m.dtype || nm.op != m.op || nm.prescale != m.prescale ||
          nm.postscale != m.postscale || tensor_bytes(nm) >= kReducedAloneBytes ||
          bytes + tensor_bytes(nm) > options_.fusion_threshold) {
        break;
      }
      bytes += tensor_bytes(nm);
      group.push_back(&n);
    }
    EDT_RETURN_IF_ERROR(run_allreduce_group(group));
    i = j;
  }
  return Status::ok();
}

Status Engine::run_allreduce_group(const std::vector<const Ready*>& group) {
  const Meta& m = group[0]->first();
  std::vector<std::shared_ptr<Op>> locals;
  {
    std::lock_guard lock(mu_);
    for (const Ready* r : group) {
      auto it = in_flight_.find(r->name);
      locals.push_back(it == in_flight_.end() ? nullptr : it->second);  // null: this rank has joined
    }
  }
  Status status;
  if (group.size() == 1 && locals[0]) {
    // One tensor: reduce the caller's buffer itself.
    reduce_scaled(*collectives_, locals[0]->data, static_cast<size_t>(num_elements(m.shape)), m, &status);
    if (!status.is_ok()) return status;
    complete(group[0]->name, Status::ok(), {});
    return Status::ok();
  }
  size_t total = 0;
  for (const Ready* r : group) total += tensor_bytes(r->first());
  if (fusion_buffer_.size() < total) fusion_buffer_.resize(total);
  size_t offset = 0;
  for (size_t k = 0; k < group.size(); ++k) {
    size_t n = tensor_bytes(group[k]->first());
    if (locals[k]) {
      std::memcpy(fusion_buffer_.data() + offset, locals[k]->data, n);
    } else {
      std::memset(fusion_buffer_.data() + offset, 0, n);  // a joined rank adds nothing
    }
    offset += n;
  }
  reduce_scaled(*collectives_, fusion_buffer_.data(), total / dtype_size(m.dtype), m, &status);
  if (!status.is_ok()) return status;
  if (group.size() > 1) fused_batches_.fetch_add(1);
  offset = 0;
  for (size_t k = 0; k < group.size(); ++k) {
    size_t n = tensor_bytes(group[k]->first());
    if (locals[k]) {
      std::memcpy(locals[k]->data, fusion_buffer_.data() + offset, n);
      complete(group[k]->name, Status::ok(), {});
    }
    offset += n;
  }
  return Status::ok();
}

Status Engine::run_one(const Ready& ready) {
  std::shared_ptr<Op> local;
  {
    std::lock_guard lock(mu_);
    auto it = in_flight_.find(ready.name);
    if (it != in_flight_.end()) local = it->second;
  }
  const Meta& m = local ? local->meta : ready.first();
  Output out;
  switch (m.type) {
    case OpType::kBarrier:
      EDT_RETURN_IF_ERROR(collectives_->barrier());
      break;
    case OpType::kBroadcast:
      EDT_RETURN_IF_ERROR(collectives_->broadcast(local->data, tensor_bytes(m), m.root));
      break;
    case OpType::kAllgather: {
      std::vector<size_t> bytes(size_);
      int64_t rows = 0;
      for (int r = 0; r < size_; ++r) {
        bytes[r] = static_cast<size_t>(ready.metas[r]->shape[0]) * row_bytes(m);
        rows += ready.metas[r]->shape[0];
      }
      out.shape = m.shape;
      out.shape[0] = rows;
      out.data.resize(std::accumulate(bytes.begin(), bytes.end(), size_t{0}));
      EDT_RETURN_IF_ERROR(collectives_->allgatherv(local->data, out.data.data(), bytes));
      break;
    }
    case OpType::kAlltoall: {
      std::vector<size_t> send(size_), recv(size_);
      int64_t rows = 0;
      for (int r = 0; r < size_; ++r) {
        send[r] = static_cast<size_t>(m.splits[r]) * row_bytes(m);
        int64_t in = ready.metas[r]->splits[rank_];
        recv[r] = static_cast<size_t>(in) * row_bytes(m);
        out.recv_splits.push_back(in);
        rows += in;
      }
      out.shape = m.shape;
      out.shape[0] = rows;
      out.data.resize(std::accumulate(recv.begin(), recv.end(), size_t{0}));
      EDT_RETURN_IF_ERROR(collectives_->alltoallv(local->data, send, out.data.data(), recv));
      break;
    }
    case OpType::kReducescatter: {
      // Rank r's block is its rows (scatter_rows); scales apply to the input
      // (prescale) and to the rows this rank keeps (postscale, average).
      const size_t row_elements = row_bytes(m) / dtype_size(m.dtype);
      std::vector<size_t> counts(size_);
      for (int r = 0; r < size_; ++r)
        counts[r] = static_cast<size_t>(scatter_rows(m.shape[0], r, size_).second) * row_elements;
      const void* in = local->data;
      std::vector<uint8_t> prescaled;
      if (m.prescale != 1.0) {
        const auto* bytes = static_cast<const uint8_t*>(local->data);
        prescaled.assign(bytes, bytes + tensor_bytes(m));
        kernels::scale(prescaled.data(), static_cast<size_t>(num_elements(m.shape)), m.dtype, m.prescale);
        in = prescaled.data();
      }
      out.shape = m.shape;
      out.shape[0] = scatter_rows(m.shape[0], rank_, size_).second;
      out.data.resize(counts[rank_] * dtype_size(m.dtype));
      EDT_RETURN_IF_ERROR(
          collectives_->reduce_scatter(in, out.data.data(), counts, m.dtype, kernels::combining_op(m.op)));
      if (double post = final_scale(m, size_); post != 1.0)
        kernels::scale(out.data.data(), counts[rank_], m.dtype, post);
      break;
    }
    case OpType::kAllreduce:
      EDT_CHECK_MSG(false, "allreduce runs in groups");
  }
  complete(ready.name, Status::ok(), std::move(out));
  return Status::ok();
}

void Engine::complete(const std::string& name, Status status, Output output) {
  std::lock_guard lock(mu_);
  auto it = in_flight_.find(name);
  if (it == in_flight_.end()) return;  // this rank had joined
  it->second->status = std::move(status);
  it->second->output = std::move(output);
  it->second->done = true;
  in_flight_.erase(it);
  finished_.notify_all();
}

void Engine::fail_everything(const Status& status) {
  std::lock_guard lock(mu_);
  broken_ = status;
  for (auto& [name, op] : in_flight_) {
    op->done = true;
    op->status = status;
  }
  in_flight_.clear();
  queue_.clear();
  if (join_op_) {
    join_op_->done = true;
    join_op_->status = status;
    join_op_.reset();
  }
  finished_.notify_all();
}

}  // namespace edt::engine
