// edt._edt: the C++ half of the Python package. It holds one Runtime (a
// Communicator and the Engine behind it) and passes tensors as raw
// (pointer, shape, dtype) triples, so no libtorch header is compiled here;
// edt.torch does the tensor side. Errors become edt._edt.EdtError with
// args (status code name, message). A process set is a Runtime of its own
// over some of the job's ranks (Runtime.subgroup).
//
// In elastic mode, ElasticJob wraps edt::elastic::State and run(): each
// membership generation gets a fresh Runtime over that generation's
// communicator, handed to the Python training function, and shut down
// before the next generation forms. Python state objects take part in
// commits, rollbacks and the sync to newcomers through PyStateObject.
//
// Runtime.engine_port() hands the engine to edt's TensorFlow ops, another
// shared object (engine_port.h).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "edt/communicator.h"
#include "edt/elastic.h"
#include "edt/store.h"
#include "edt/tcp_store.h"
#include "engine/communicator_collectives.h"
#include "engine/engine.h"
#include "engine_port.h"
#include "launcher/slurm_allocation.h"

namespace py = pybind11;

namespace edt::python {
namespace {

struct EdtError {
  std::string code;
  std::string message;
};

void throw_if_error(const Status& s) {
  if (!s.is_ok()) throw EdtError{status_code_name(s.code()), s.message()};
}

template <typename T>
T value_or_throw(Result<T> r) {
  throw_if_error(r.status());
  return std::move(r).value();
}

// A process not started by edtrun (no EDT_SIZE) is a job of one rank, as a
// Horovod script run with plain `python3` is.
std::shared_ptr<Communicator> make_communicator() {
  if (std::getenv("EDT_SIZE") == nullptr) {
    CommunicatorOptions options;
    options.rank = 0;
    options.size = 1;
    return value_or_throw(Communicator::create(std::make_shared<MemoryStore>(), options));
  }
  return value_or_throw(Communicator::from_env());
}

engine::Meta make_meta(int type, int dtype, int op, int root, double prescale, double postscale,
                       std::vector<int64_t> shape, std::vector<int64_t> splits) {
  engine::Meta m;
  m.type = static_cast<engine::OpType>(type);
  m.dtype = static_cast<DataType>(dtype);
  m.op = static_cast<ReduceOp>(op);
  m.root = root;
  m.prescale = prescale;
  m.postscale = postscale;
  m.shape = std::move(shape);
  m.splits = std::move(splits);
  return m;
}

PortError port_error(const Status& s) { return PortError{status_code_name(s.code()), s.message()}; }

// The engine as edt's TensorFlow ops reach it; shares the engine with the
// Runtime, so a port the ops still hold outlives the Runtime safely.
class RuntimePort final : public EnginePort {
 public:
  explicit RuntimePort(std::shared_ptr<engine::Engine> engine) : engine_(std::move(engine)) {}

  int64_t submit(const PortRequest& r, PortError* error) override {
    Result<int64_t> handle = engine_->submit(
        r.name, make_meta(r.type, r.dtype, r.op, r.root, r.prescale, r.postscale, r.shape, r.splits), r.data);
    if (handle.is_ok()) return handle.value();
    *error = port_error(handle.status());
    return -1;
  }

  int64_t submit_join(PortError* error) override {
    Result<int64_t> handle = engine_->submit_join();
    if (handle.is_ok()) return handle.value();
    *error = port_error(handle.status());
    return -1;
  }

  bool wait(int64_t handle, PortOutput* output, PortError* error) override {
    engine::Output out;
    Status status = engine_->wait(handle, &out);
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

class Runtime {
 public:
  Runtime() : Runtime(make_communicator()) {}
  explicit Runtime(std::shared_ptr<Communicator> communicator) : communicator_(std::move(communicator)) {
    engine::EngineOptions options = value_or_throw(engine::engine_options_from_env(communicator_->local_size()));
    engine_ = value_or_throw(engine::Engine::start(engine::communicator_collectives(communicator_), options));
  }
  ~Runtime() {
    py::gil_scoped_release release;
    engine_.reset();
  }

  const Communicator& comm() const { return *communicator_; }

  // A Runtime over some of this one's ranks (a process set), with an
  // engine of its own; every member calls it alike (see
  // Communicator::create_subgroup).
  std::shared_ptr<Runtime> subgroup(const std::vector<int>& members, const std::string& scope) {
    Result<std::shared_ptr<Communicator>> formed = [&] {
      py::gil_scoped_release release;
      return communicator_->create_subgroup(members, scope);
    }();
    return std::make_shared<Runtime>(value_or_throw(std::move(formed)));
  }

  int64_t submit(const std::string& name, int type, int dtype, int op, int root, double prescale, double postscale,
                 std::vector<int64_t> shape, std::vector<int64_t> splits, uintptr_t data) {
    engine::Meta m = make_meta(type, dtype, op, root, prescale, postscale, std::move(shape), std::move(splits));
    return value_or_throw(engine_->submit(name, m, reinterpret_cast<void*>(data)));
  }

  // The address of a new std::shared_ptr<EnginePort> over this engine, for
  // the receiver to take over (engine_port.h).
  uintptr_t engine_port() const {
    auto* holder = new std::shared_ptr<EnginePort>(std::make_shared<RuntimePort>(engine_));
    return reinterpret_cast<uintptr_t>(holder);
  }

  int64_t submit_join() { return value_or_throw(engine_->submit_join()); }
  bool poll(int64_t handle) { return value_or_throw(engine_->poll(handle)); }

  // (bytes as a uint8 array or None, shape, recv_splits, last joined rank)
  py::tuple wait(int64_t handle) {
    engine::Output out;
    Status status;
    {
      py::gil_scoped_release release;
      status = engine_->wait(handle, &out);
    }
    throw_if_error(status);
    py::object data = py::none();
    if (!out.shape.empty() || !out.data.empty()) {
      auto* bytes = new std::vector<uint8_t>(std::move(out.data));
      py::capsule owner(bytes, [](void* p) { delete static_cast<std::vector<uint8_t>*>(p); });
      data = py::array_t<uint8_t>({bytes->size()}, {size_t{1}}, bytes->data(), owner);
    }
    return py::make_tuple(data, out.shape, out.recv_splits, out.last_joined_rank);
  }

  void shutdown() {
    Status s;
    {
      py::gil_scoped_release release;
      s = engine_->shutdown();
    }
    throw_if_error(s);
  }

  bool ended() const { return engine_->ended(); }
  uint64_t fused_batches() const { return engine_->fused_batches(); }
  uint64_t fusion_threshold() const { return engine_->options().fusion_threshold; }
  double cycle_time_ms() const { return engine_->options().cycle_time.count() / 1000.0; }

 private:
  std::shared_ptr<Communicator> communicator_;
  std::shared_ptr<engine::Engine> engine_;
};

// Bytes that Python reads in place, through the buffer protocol: a state
// that arrived, which its tensors may keep viewing (torch.frombuffer holds
// the memoryview, which holds this, which holds the received buffer).
struct SharedBytes {
  std::shared_ptr<const void> owner;
  std::string_view bytes;
};

// A StateObject implemented in Python: serialize() -> bytes,
// deserialize(bytes-like), on_reset(rank, size), optionally commit() ->
// bool, restore(), committed_bytes() -> bytes (StateObject::commit) and
// committed_views() -> [buffer] (StateObject::committed_views). It may be
// called from run()'s rejoin while the GIL is held by the thread that
// called ElasticJob.run.
class PyStateObject final : public elastic::StateObject {
 public:
  explicit PyStateObject(py::object target) : target_(std::move(target)) {}

  std::string serialize() const override {
    py::gil_scoped_acquire gil;
    return target_.attr("serialize")().cast<std::string>();
  }

  Status deserialize(std::string_view bytes) override {
    py::gil_scoped_acquire gil;
    return deserialize_from(py::bytes(bytes.data(), bytes.size()));
  }

  // A received state, read in place: no copy into a bytes object.
  Status deserialize_shared(const std::shared_ptr<const void>& owner, std::string_view bytes) override {
    py::gil_scoped_acquire gil;
    return deserialize_from(py::memoryview(py::cast(SharedBytes{owner, bytes})));
  }

  void on_reset(int rank, int size) override {
    py::gil_scoped_acquire gil;
    target_.attr("on_reset")(rank, size);
  }

  // An object with commit() keeps its committed copy itself (in memory:
  // a commit serializes nothing), and then has restore() and
  // committed_bytes() too.
  bool commit() override {
    py::gil_scoped_acquire gil;
    release_views();  // what was lent is of the commit this one replaces
    return py::hasattr(target_, "commit") && target_.attr("commit")().cast<bool>();
  }

  Status restore() override {
    py::gil_scoped_acquire gil;
    try {
      target_.attr("restore")();
    } catch (py::error_already_set& e) {
      return invalid_argument(std::string("cannot restore the Python state: ") + e.what());
    }
    return Status::ok();
  }

  std::string committed_bytes() const override {
    py::gil_scoped_acquire gil;
    return target_.attr("committed_bytes")().cast<std::string>();
  }

  // The buffers committed_views() returns, held (with their views) until
  // the next commit or call: the committed copy's own tensors, sent
  // without a copy.
  std::vector<std::string_view> committed_views() const override {
    py::gil_scoped_acquire gil;
    release_views();
    if (!py::hasattr(target_, "committed_views")) return {};
    std::vector<std::string_view> views;
    try {
      lent_objects_ = target_.attr("committed_views")();
      for (py::handle item : lent_objects_) {
        py::buffer_info info = py::reinterpret_borrow<py::buffer>(item).request();
        if (info.ndim > 1 || (info.ndim == 1 && info.strides[0] != info.itemsize)) return {};
        views.emplace_back(static_cast<const char*>(info.ptr), static_cast<size_t>(info.size * info.itemsize));
        lent_.push_back(std::move(info));
      }
    } catch (py::error_already_set&) {
      return {};  // then committed_bytes(), which says what is wrong
    }
    return views;
  }

 private:
  void release_views() const {
    lent_.clear();
    lent_objects_ = py::object();
  }

  Status deserialize_from(const py::object& data) {
    try {
      target_.attr("deserialize")(data);
    } catch (py::error_already_set& e) {
      return invalid_argument(std::string("cannot restore the Python state: ") + e.what());
    }
    return Status::ok();
  }

  py::object target_;
  mutable py::object lent_objects_;
  mutable std::vector<py::buffer_info> lent_;
};

// The exception classes of edt.common.exceptions, by name.
py::object exception_class(const char* name) {
  return py::module_::import("edt.common.exceptions").attr(name);
}

class ElasticJob {
 public:
  ElasticJob() : state_(value_or_throw(elastic::State::from_env())) {}

  // Every worker registers the same objects in the same order, before run().
  void add(const std::string& name, py::object object) {
    objects_.push_back(std::make_unique<PyStateObject>(std::move(object)));
    state_->add(name, objects_.back().get());
  }

  // Calls fn(runtime) once per generation until it returns. fn raising
  // HostsUpdatedInterrupt moves to the next generation keeping the state;
  // HorovodInternalError rolls back to the last commit first. Any other
  // exception ends run() with it. Returns False when this worker left the
  // job because its host was removed.
  bool run(const py::function& fn) {
    std::optional<py::error_already_set> raised;
    const py::object hosts_updated = exception_class("HostsUpdatedInterrupt");
    const py::object collective_failed = exception_class("HorovodInternalError");
    Status status = elastic::run(*state_, [&](elastic::State& state) -> Status {
      // The Runtime does not own the communicator: State replaces it at the
      // next generation, after fn returned and the engine was shut down.
      auto runtime = std::make_shared<Runtime>(
          std::shared_ptr<Communicator>(std::shared_ptr<Communicator>(), &state.comm()));
      try {
        fn(std::move(runtime));
        return Status::ok();
      } catch (py::error_already_set& e) {
        if (e.matches(hosts_updated)) return Status(StatusCode::kHostsUpdated, e.what());
        if (e.matches(collective_failed)) return Status(StatusCode::kPeerFailed, e.what());
        raised.emplace(std::move(e));
        return internal_error("the training function raised");
      }
    });
    if (raised) throw std::move(*raised);
    if (elastic::left_the_job(status)) return false;
    throw_if_error(status);
    return true;
  }

  // (generation, rank, hosts of every rank) now, or of the first generation
  // (waited for); None when the job ended or this worker left it.
  py::object placement() {
    Result<elastic::Placement> p = [&] {
      py::gil_scoped_release release;
      return state_->placement();
    }();
    if (!p.is_ok() && elastic::left_the_job(p.status())) return py::none();
    throw_if_error(p.status());
    return py::make_tuple(p->generation, p->rank, p->hosts);
  }

  void save() { state_->save(); }
  void restore() { throw_if_error(state_->restore()); }
  bool membership_changed() const { return state_->membership_changed(); }
  int64_t generation() const { return state_->generation(); }
  int64_t commit_id() const { return state_->commit_id(); }
  int resets() const { return state_->resets(); }

 private:
  std::unique_ptr<elastic::State> state_;
  std::vector<std::unique_ptr<PyStateObject>> objects_;
};

}  // namespace
}  // namespace edt::python

PYBIND11_MODULE(_edt, m) {
  using edt::python::Runtime;
  m.doc() = "edt's C++ runtime: communicator and engine";
  static py::exception<edt::python::EdtError> error(m, "EdtError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const edt::python::EdtError& e) {
      PyErr_SetObject(error.ptr(), py::make_tuple(e.code, e.message).ptr());
    }
  });

  // The job's rendezvous store when no edtrun hosts one (under srun, rank 0
  // serves it; edt/_slurm.py). Serves until the object is collected.
  py::class_<edt::TcpStoreServer, std::unique_ptr<edt::TcpStoreServer>>(m, "StoreServer")
      .def(py::init([](const std::string& host, uint16_t port) {
             return edt::python::value_or_throw(edt::TcpStoreServer::start({host, port}));
           }),
           py::arg("host"), py::arg("port"))
      .def_property_readonly("port", &edt::TcpStoreServer::port);

  // Slurm's compact node list ("tt-worker-[0-2]") as host names, for
  // edt/_slurm.py: edtrun's parser (launcher/slurm_allocation.h), so a task
  // of srun reads a node list exactly as edtrun does.
  m.def(
      "expand_slurm_nodelist",
      [](const std::string& nodelist) { return edt::python::value_or_throw(edt::launcher::expand_nodelist(nodelist)); },
      py::arg("nodelist"));

  py::class_<Runtime, std::shared_ptr<Runtime>>(m, "Runtime")
      .def(py::init<>())
      .def_property_readonly("rank", [](const Runtime& r) { return r.comm().rank(); })
      .def_property_readonly("size", [](const Runtime& r) { return r.comm().size(); })
      .def_property_readonly("local_rank", [](const Runtime& r) { return r.comm().local_rank(); })
      .def_property_readonly("local_size", [](const Runtime& r) { return r.comm().local_size(); })
      .def_property_readonly("cross_rank", [](const Runtime& r) { return r.comm().cross_rank(); })
      .def_property_readonly("cross_size", [](const Runtime& r) { return r.comm().cross_size(); })
      .def_property_readonly("transport", [](const Runtime& r) { return r.comm().transport_name(); })
      .def_property_readonly("ended", &Runtime::ended)
      .def_property_readonly("fused_batches", &Runtime::fused_batches)
      .def_property_readonly("fusion_threshold", &Runtime::fusion_threshold)
      .def_property_readonly("cycle_time_ms", &Runtime::cycle_time_ms)
      .def("submit", &Runtime::submit, py::arg("name"), py::arg("type"), py::arg("dtype"), py::arg("op"),
           py::arg("root"), py::arg("prescale"), py::arg("postscale"), py::arg("shape"), py::arg("splits"),
           py::arg("data"))
      .def("engine_port", &Runtime::engine_port)
      .def("subgroup", &Runtime::subgroup, py::arg("members"), py::arg("scope"))
      .def("submit_join", &Runtime::submit_join)
      .def("poll", &Runtime::poll)
      .def("wait", &Runtime::wait)
      .def("shutdown", &Runtime::shutdown);

  using edt::elastic::ElasticSampler;
  py::class_<ElasticSampler>(m, "ElasticSampler")
      .def(py::init([](uint64_t num_samples, uint64_t seed, bool shuffle) {
             return std::make_unique<ElasticSampler>(edt::elastic::ElasticSamplerOptions{num_samples, seed, shuffle});
           }),
           py::arg("num_samples"), py::arg("seed"), py::arg("shuffle"))
      .def("set_epoch", &ElasticSampler::set_epoch)
      .def("reset", [](ElasticSampler& s, int rank, int size) {
        if (size < 1 || rank < 0 || rank >= size) {
          throw py::value_error("ElasticSampler.reset: rank " + std::to_string(rank) + " is not in 0.." +
                                std::to_string(size - 1));
        }
        s.reset(rank, size);
      })
      .def("batch", &ElasticSampler::batch)
      .def("record_batch", &ElasticSampler::record_batch)
      .def("steps_left", &ElasticSampler::steps_left)
      .def("shard", &ElasticSampler::shard)
      .def_property_readonly("epoch", &ElasticSampler::epoch)
      .def_property_readonly("epoch_done", &ElasticSampler::epoch_done)
      .def_property_readonly("processed_count", &ElasticSampler::processed_count)
      .def_property_readonly("remaining_count", &ElasticSampler::remaining_count)
      .def("serialize", [](const ElasticSampler& s) { return py::bytes(s.serialize()); })
      .def("deserialize", [](ElasticSampler& s, const py::bytes& b) {
        edt::python::throw_if_error(s.deserialize(std::string_view(b)));
      });

  using edt::python::ElasticJob;
  using edt::python::SharedBytes;
  py::class_<SharedBytes>(m, "_SharedBytes", py::buffer_protocol()).def_buffer([](SharedBytes& b) {
    return py::buffer_info(const_cast<char*>(b.bytes.data()), 1, py::format_descriptor<uint8_t>::format(), 1,
                           {static_cast<py::ssize_t>(b.bytes.size())}, {1}, /*readonly=*/true);
  });
  py::class_<ElasticJob>(m, "ElasticJob")
      .def(py::init<>())
      .def("add", &ElasticJob::add, py::arg("name"), py::arg("object"))
      .def("run", &ElasticJob::run, py::arg("fn"))
      .def("placement", &ElasticJob::placement)
      .def("save", &ElasticJob::save)
      .def("restore", &ElasticJob::restore)
      .def_property_readonly("membership_changed", &ElasticJob::membership_changed)
      .def_property_readonly("generation", &ElasticJob::generation)
      .def_property_readonly("commit_id", &ElasticJob::commit_id)
      .def_property_readonly("resets", &ElasticJob::resets);
}
