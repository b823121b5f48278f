// libedt_capi (capi.h): the Runtime (a Communicator and the Engine behind
// it), the elastic job, the sampler, the store server and the Slurm node
// list parser behind a C ABI. No C++ exception and no C++ type crosses it:
// a failure is this thread's last error, a Python object is a callback and
// a context pointer.
#include "capi.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edt/communicator.h"
#include "edt/elastic.h"
#include "edt/store.h"
#include "edt/tcp_store.h"
#include "engine/communicator_collectives.h"
#include "engine/engine.h"
#include "engine_port.h"
#include "launcher/slurm_allocation.h"

namespace engine = edt::engine;
using edt::python::EnginePort;
using edt::python::PortError;
using edt::python::PortOutput;
using edt::python::PortRequest;

namespace {

thread_local std::string last_code, last_message, callback_message;

int fail(const edt::Status& s) {
  last_code = edt::status_code_name(s.code());
  last_message = s.message();
  return -1;
}

// A C string the caller frees with edt_free.
char* copy_out(std::string_view s) {
  auto* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) return nullptr;
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += (out.empty() ? "" : "\n") + line;
  return out;
}

engine::Meta make_meta(int type, int dtype, int op, int root, double prescale, double postscale,
                       std::vector<int64_t> shape, std::vector<int64_t> splits) {
  engine::Meta m;
  m.type = static_cast<engine::OpType>(type);
  m.dtype = static_cast<edt::DataType>(dtype);
  m.op = static_cast<edt::ReduceOp>(op);
  m.root = root;
  m.prescale = prescale;
  m.postscale = postscale;
  m.shape = std::move(shape);
  m.splits = std::move(splits);
  return m;
}

PortError port_error(const edt::Status& s) { return {edt::status_code_name(s.code()), s.message()}; }

// The engine as edt's TensorFlow ops reach it; shares the engine with the
// Runtime, so a port the ops still hold outlives the Runtime safely.
class RuntimePort final : public EnginePort {
 public:
  explicit RuntimePort(std::shared_ptr<engine::Engine> engine) : engine_(std::move(engine)) {}

  int64_t submit(const PortRequest& r, PortError* error) override {
    auto handle = engine_->submit(
        r.name, make_meta(r.type, r.dtype, r.op, r.root, r.prescale, r.postscale, r.shape, r.splits), r.data);
    if (handle.is_ok()) return handle.value();
    *error = port_error(handle.status());
    return -1;
  }

  int64_t submit_join(PortError* error) override {
    auto handle = engine_->submit_join();
    if (handle.is_ok()) return handle.value();
    *error = port_error(handle.status());
    return -1;
  }

  bool wait(int64_t handle, PortOutput* output, PortError* error) override {
    engine::Output out;
    edt::Status status = engine_->wait(handle, &out);
    if (!status.is_ok()) {
      *error = port_error(status);
      return false;
    }
    output->data = std::move(out.data);
    output->shape = std::move(out.shape);
    output->recv_splits = std::move(out.recv_splits);
    output->last_joined_rank = out.last_joined_rank;
    return true;
  }

  int rank() const override { return engine_->rank(); }
  int size() const override { return engine_->size(); }

 private:
  std::shared_ptr<engine::Engine> engine_;
};

// A process not started by edtrun (no EDT_SIZE) is a job of one rank, as a
// Horovod script run with plain `python3` is.
edt::Result<std::shared_ptr<edt::Communicator>> make_communicator() {
  if (std::getenv("EDT_SIZE") != nullptr) return edt::Communicator::from_env();
  edt::CommunicatorOptions options;
  options.rank = 0;
  options.size = 1;
  return edt::Communicator::create(std::make_shared<edt::MemoryStore>(), options);
}

}  // namespace

struct edt_store_server {
  std::unique_ptr<edt::TcpStoreServer> server;
};

struct edt_runtime {
  std::shared_ptr<edt::Communicator> communicator;
  std::shared_ptr<engine::Engine> engine;
};

struct edt_output {
  engine::Output out;
};

struct edt_sampler {
  edt::elastic::ElasticSampler sampler;
};

namespace {

int make_runtime(std::shared_ptr<edt::Communicator> communicator, edt_runtime** out) {
  auto options = engine::engine_options_from_env(communicator->local_size());
  if (!options.is_ok()) return fail(options.status());
  auto engine = engine::Engine::start(engine::communicator_collectives(communicator), options.value());
  if (!engine.is_ok()) return fail(engine.status());
  *out = new edt_runtime{std::move(communicator), std::move(engine).value()};
  return 0;
}

// A state object whose methods are the caller's callbacks.
class CallbackState final : public edt::elastic::StateObject {
 public:
  explicit CallbackState(const edt_state_callbacks& cb) : cb_(cb) {}

  std::string serialize() const override { return bytes_of(cb_.serialize); }

  edt::Status deserialize(std::string_view bytes) override {
    return deserialize_shared(std::make_shared<std::string>(bytes), bytes);
  }

  // Read in place: the owner stays alive until the caller releases it.
  edt::Status deserialize_shared(const std::shared_ptr<const void>& owner, std::string_view bytes) override {
    auto* held = new std::shared_ptr<const void>(owner);
    if (cb_.deserialize(cb_.context, bytes.data(), bytes.size(), held) == 0) return edt::Status::ok();
    return callback_failed("cannot restore the Python state");
  }

  void on_reset(int rank, int size) override { cb_.on_reset(cb_.context, rank, size); }

  bool commit() override {
    int kept = 0;
    return cb_.commit(cb_.context, &kept) == 0 && kept != 0;
  }

  edt::Status restore() override {
    if (cb_.restore(cb_.context) == 0) return edt::Status::ok();
    return callback_failed("cannot restore the Python state");
  }

  std::string committed_bytes() const override { return bytes_of(cb_.committed_bytes); }

  std::vector<std::string_view> committed_views() const override {
    size_t count = 0;
    const uint64_t* addresses = nullptr;
    const uint64_t* sizes = nullptr;
    if (cb_.committed_views(cb_.context, &count, &addresses, &sizes) != 0) return {};
    std::vector<std::string_view> views;
    for (size_t i = 0; i < count; ++i)
      views.emplace_back(reinterpret_cast<const char*>(static_cast<uintptr_t>(addresses[i])), sizes[i]);
    return views;
  }

 private:
  std::string bytes_of(int (*fn)(void*, const char**, size_t*)) const {
    const char* data = nullptr;
    size_t size = 0;
    if (fn(cb_.context, &data, &size) != 0 || data == nullptr) return {};
    return std::string(data, size);
  }

  static edt::Status callback_failed(const std::string& what) {
    return edt::invalid_argument(what + ": " + std::exchange(callback_message, ""));
  }

  edt_state_callbacks cb_;
};

}  // namespace

struct edt_elastic_job {
  std::unique_ptr<edt::elastic::State> state;
  std::vector<std::unique_ptr<CallbackState>> objects;
};

extern "C" {

const char* edt_error_code(void) { return last_code.c_str(); }
const char* edt_error_message(void) { return last_message.c_str(); }
void edt_set_callback_error(const char* message) { callback_message = message ? message : ""; }
void edt_free(void* p) { std::free(p); }

int edt_expand_slurm_nodelist(const char* nodelist, char** names) {
  auto hosts = edt::launcher::expand_nodelist(nodelist ? nodelist : "");
  if (!hosts.is_ok()) return fail(hosts.status());
  *names = copy_out(joined(hosts.value()));
  return 0;
}

int edt_store_server_new(const char* host, uint16_t port, edt_store_server** out) {
  auto server = edt::TcpStoreServer::start({host ? host : "", port});
  if (!server.is_ok()) return fail(server.status());
  *out = new edt_store_server{std::move(server).value()};
  return 0;
}
int edt_store_server_port(const edt_store_server* s) { return s->server->port(); }
void edt_store_server_free(edt_store_server* s) { delete s; }

int edt_runtime_new(edt_runtime** out) {
  auto communicator = make_communicator();
  if (!communicator.is_ok()) return fail(communicator.status());
  return make_runtime(std::move(communicator).value(), out);
}

int edt_runtime_subgroup(edt_runtime* r, const int* members, int count, const char* scope, edt_runtime** out) {
  auto formed = r->communicator->create_subgroup(std::vector<int>(members, members + count), scope ? scope : "");
  if (!formed.is_ok()) return fail(formed.status());
  return make_runtime(std::move(formed).value(), out);
}

void edt_runtime_free(edt_runtime* r) { delete r; }

int64_t edt_runtime_field(const edt_runtime* r, int field) {
  const edt::Communicator& c = *r->communicator;
  switch (field) {
    case EDT_RANK: return c.rank();
    case EDT_SIZE: return c.size();
    case EDT_LOCAL_RANK: return c.local_rank();
    case EDT_LOCAL_SIZE: return c.local_size();
    case EDT_CROSS_RANK: return c.cross_rank();
    case EDT_CROSS_SIZE: return c.cross_size();
    case EDT_ENDED: return r->engine->ended();
    case EDT_FUSED_BATCHES: return static_cast<int64_t>(r->engine->fused_batches());
    case EDT_FUSION_THRESHOLD: return static_cast<int64_t>(r->engine->options().fusion_threshold);
  }
  return -1;
}
double edt_runtime_cycle_time_ms(const edt_runtime* r) { return r->engine->options().cycle_time.count() / 1000.0; }
const char* edt_runtime_transport(const edt_runtime* r) {
  thread_local std::string name;
  name = r->communicator->transport_name();
  return name.c_str();
}

int64_t edt_runtime_submit(edt_runtime* r, const char* name, int type, int dtype, int op, int root, double prescale,
                           double postscale, const int64_t* shape, int ndim, const int64_t* splits, int nsplits,
                           void* data) {
  engine::Meta m = make_meta(type, dtype, op, root, prescale, postscale, std::vector<int64_t>(shape, shape + ndim),
                             std::vector<int64_t>(splits, splits + nsplits));
  auto handle = r->engine->submit(name, m, data);
  return handle.is_ok() ? handle.value() : fail(handle.status());
}

int64_t edt_runtime_submit_join(edt_runtime* r) {
  auto handle = r->engine->submit_join();
  return handle.is_ok() ? handle.value() : fail(handle.status());
}

int edt_runtime_poll(edt_runtime* r, int64_t handle, int* done) {
  auto polled = r->engine->poll(handle);
  if (!polled.is_ok()) return fail(polled.status());
  *done = polled.value() ? 1 : 0;
  return 0;
}

int edt_runtime_shutdown(edt_runtime* r) {
  edt::Status s = r->engine->shutdown();
  return s.is_ok() ? 0 : fail(s);
}

void* edt_runtime_engine_port(edt_runtime* r) {
  return new std::shared_ptr<EnginePort>(std::make_shared<RuntimePort>(r->engine));
}

int edt_runtime_wait(edt_runtime* r, int64_t handle, edt_output** out) {
  auto result = std::make_unique<edt_output>();
  edt::Status s = r->engine->wait(handle, &result->out);
  if (!s.is_ok()) return fail(s);
  *out = result.release();
  return 0;
}

int edt_output_has_data(const edt_output* o) { return !o->out.shape.empty() || !o->out.data.empty(); }
uint8_t* edt_output_data(edt_output* o, size_t* size) {
  *size = o->out.data.size();
  return o->out.data.data();
}
const int64_t* edt_output_shape(const edt_output* o, int* ndim) {
  *ndim = static_cast<int>(o->out.shape.size());
  return o->out.shape.data();
}
const int64_t* edt_output_recv_splits(const edt_output* o, int* count) {
  *count = static_cast<int>(o->out.recv_splits.size());
  return o->out.recv_splits.data();
}
int edt_output_last_joined_rank(const edt_output* o) { return o->out.last_joined_rank; }
void edt_output_free(edt_output* o) { delete o; }

int edt_sampler_new(uint64_t num_samples, uint64_t seed, int shuffle, edt_sampler** out) {
  *out = new edt_sampler{edt::elastic::ElasticSampler({num_samples, seed, shuffle != 0})};
  return 0;
}
void edt_sampler_free(edt_sampler* s) { delete s; }
void edt_sampler_set_epoch(edt_sampler* s, uint64_t epoch) { s->sampler.set_epoch(epoch); }
int edt_sampler_reset(edt_sampler* s, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size)
    return fail(edt::invalid_argument("ElasticSampler.reset: rank " + std::to_string(rank) + " is not in 0.." +
                                      std::to_string(size - 1)));
  s->sampler.reset(rank, size);
  return 0;
}
void edt_sampler_record_batch(edt_sampler* s, uint64_t batch_size) { s->sampler.record_batch(batch_size); }
uint64_t edt_sampler_steps_left(const edt_sampler* s, uint64_t batch_size) { return s->sampler.steps_left(batch_size); }

static int indices_out(const std::vector<uint64_t>& v, uint64_t** indices, size_t* count) {
  *count = v.size();
  *indices = static_cast<uint64_t*>(std::malloc(std::max<size_t>(1, v.size()) * sizeof(uint64_t)));
  if (*indices == nullptr) return fail(edt::internal_error("out of memory for the sampler's indices"));
  std::copy(v.begin(), v.end(), *indices);
  return 0;
}
int edt_sampler_batch(const edt_sampler* s, uint64_t batch_size, uint64_t** indices, size_t* count) {
  return indices_out(s->sampler.batch(batch_size), indices, count);
}
int edt_sampler_shard(const edt_sampler* s, uint64_t** indices, size_t* count) {
  return indices_out(s->sampler.shard(), indices, count);
}

uint64_t edt_sampler_field(const edt_sampler* s, int field) {
  switch (field) {
    case EDT_SAMPLER_EPOCH: return s->sampler.epoch();
    case EDT_SAMPLER_EPOCH_DONE: return s->sampler.epoch_done();
    case EDT_SAMPLER_PROCESSED: return s->sampler.processed_count();
    case EDT_SAMPLER_REMAINING: return s->sampler.remaining_count();
  }
  return 0;
}

int edt_sampler_serialize(const edt_sampler* s, char** bytes, size_t* size) {
  const std::string data = s->sampler.serialize();
  *size = data.size();
  *bytes = copy_out(data);
  return 0;
}

int edt_sampler_deserialize(edt_sampler* s, const char* bytes, size_t size) {
  edt::Status status = s->sampler.deserialize(std::string_view(bytes, size));
  return status.is_ok() ? 0 : fail(status);
}

void edt_release_owner(void* owner) { delete static_cast<std::shared_ptr<const void>*>(owner); }

int edt_elastic_job_new(edt_elastic_job** out) {
  auto state = edt::elastic::State::from_env();
  if (!state.is_ok()) return fail(state.status());
  *out = new edt_elastic_job{std::move(state).value(), {}};
  return 0;
}
void edt_elastic_job_free(edt_elastic_job* j) { delete j; }

int edt_elastic_job_add(edt_elastic_job* j, const char* name, const edt_state_callbacks* callbacks) {
  j->objects.push_back(std::make_unique<CallbackState>(*callbacks));
  j->state->add(name, j->objects.back().get());
  return 0;
}

int edt_elastic_job_run(edt_elastic_job* j, edt_generation_fn fn, void* context, int* stayed) {
  bool raised = false;
  edt::Status status = edt::elastic::run(*j->state, [&](edt::elastic::State& state) -> edt::Status {
    // The Runtime does not own the communicator: State replaces it at the
    // next generation, after fn returned and the engine was shut down.
    edt_runtime* runtime = nullptr;
    if (make_runtime(std::shared_ptr<edt::Communicator>(std::shared_ptr<edt::Communicator>(), &state.comm()),
                     &runtime) != 0)
      return edt::internal_error("cannot start the generation's engine: " + last_message);
    switch (fn(context, runtime)) {
      case EDT_GENERATION_DONE: return edt::Status::ok();
      case EDT_HOSTS_UPDATED: return edt::Status(edt::StatusCode::kHostsUpdated, "the hosts changed");
      case EDT_COLLECTIVE_FAILED: return edt::Status(edt::StatusCode::kPeerFailed, "a collective failed");
    }
    raised = true;
    return edt::internal_error("the training function raised");
  });
  if (raised) {
    last_code = "RAISED";
    last_message = "the training function raised";
    return -1;
  }
  *stayed = edt::elastic::left_the_job(status) ? 0 : 1;
  return status.is_ok() || *stayed == 0 ? 0 : fail(status);
}

int edt_elastic_job_placement(edt_elastic_job* j, int* present, int64_t* generation, int* rank, char** hosts) {
  auto p = j->state->placement();
  *present = 0;
  if (!p.is_ok()) return edt::elastic::left_the_job(p.status()) ? 0 : fail(p.status());
  *present = 1;
  *generation = p->generation;
  *rank = p->rank;
  *hosts = copy_out(joined(p->hosts));
  return 0;
}

void edt_elastic_job_save(edt_elastic_job* j) { j->state->save(); }
int edt_elastic_job_restore(edt_elastic_job* j) {
  edt::Status s = j->state->restore();
  return s.is_ok() ? 0 : fail(s);
}

int64_t edt_elastic_job_field(const edt_elastic_job* j, int field) {
  switch (field) {
    case EDT_JOB_MEMBERSHIP_CHANGED: return j->state->membership_changed();
    case EDT_JOB_GENERATION: return j->state->generation();
    case EDT_JOB_COMMIT_ID: return j->state->commit_id();
    case EDT_JOB_RESETS: return j->state->resets();
  }
  return -1;
}

}  // extern "C"
