// edt's collectives as TensorFlow ops: EdtAllreduce, EdtAllgather,
// EdtBroadcast, EdtAlltoall, EdtReducescatter, EdtBarrier and EdtJoin,
// which edt.tensorflow (horovod.tensorflow) wraps. Graph ops, so they run
// inside tf.function as well as eagerly; CPU tensors.
//
// Written against TensorFlow's C API for ops and kernels (tensorflow/c/
// ops.h and kernels.h), never its C++ classes: _edt_tf_ops.so calls only
// TF_* C functions of libtensorflow_framework.so.2, so one build loads with
// tf.load_op_library into any TensorFlow that has them (2.13 and later:
// TF_NewAsyncKernelBuilder), whatever its compiler, C++ ABI or version, in
// an image edt did not build (docs/images.md). It carries its own C++
// runtime (-static-libstdc++) and exports only edt_tf_adopt_port.
//
// The ops reach the engines of edt's current Runtime and of its process
// sets through EnginePorts (../engine_port.h), one per process set id, that
// edt.tensorflow hands over with edt_tf_adopt_port(); this object links no
// part of libedt. An op runs on the port of its process_set_id attribute
// (0: the whole job). Before a port is handed over, or after it was
// withdrawn (hvd.shutdown()), the op fails with FailedPrecondition.
//
// The kernels are asynchronous: the compute function submits the request
// and returns; the waiter thread waits for it and completes the op, so
// TensorFlow's executor runs other ops meanwhile, and the engine fuses the
// requests that are pending together (a step's gradients).
//
// Names: the engine matches requests across ranks by name. An op's name is
// its tensor_name attribute when set (edt.tensorflow sets it for eager
// calls, which have no node name), else its node name, which is the same
// on every rank that builds the same graph.
//
// Errors, as Horovod's TensorFlow ops report them: a request the engine
// refuses at once (bad splits, a scalar to scatter) is InvalidArgument;
// ranks that disagree about a request (shapes, types, operations) make it
// FailedPrecondition on every rank; a collective that failed while it ran
// is Unknown.
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../engine_port.h"
#include "edt/types.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

namespace edt::python::tf_ops {
namespace {

using ::edt::DataType;

// engine::OpType's numbers (src/engine/request.h).
constexpr int kAllreduce = 0;
constexpr int kAllgather = 1;
constexpr int kBroadcast = 2;
constexpr int kAlltoall = 3;
constexpr int kReducescatter = 4;
constexpr int kBarrier = 5;
constexpr int kJoin = -1;  // not a request kind: EnginePort::submit_join

std::mutex port_mu;
std::map<int, std::shared_ptr<EnginePort>> ports;  // process set id -> port; guarded by port_mu

std::shared_ptr<EnginePort> current_port(int process_set_id) {
  std::lock_guard<std::mutex> lock(port_mu);
  auto it = ports.find(process_set_id);
  return it == ports.end() ? nullptr : it->second;
}

// The thread that waits for submitted requests, in the order they were
// submitted, and completes their ops. Every op submits its request before
// it is queued here, so the cycles a wait runs (engine.h) complete the
// requests behind it too; a request that finished early waits only for its
// turn. One thread, not one per request: with several threads in
// Engine::wait at once, the ranks' communicators fell out of step (a
// shared-memory round or a TCP agreement waited forever, about one run in
// three of python_tensorflow_np2), which one waiter never showed. Never
// destroyed: it may still wait while the process exits.
class Waiters {
 public:
  void run(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    if (!started_) {
      started_ = true;
      std::thread([this] { loop(); }).detach();
    }
    ready_.notify_one();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ready_.wait(lock, [this] { return !tasks_.empty(); });
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool started_ = false;                     // guarded by mu_
};

Waiters& waiters() {
  static Waiters* instance = new Waiters;
  return *instance;
}

// What an op reports: TF_OK, or a TensorFlow error code and its message.
struct Error {
  TF_Code code = TF_OK;
  std::string message;

  bool ok() const { return code == TF_OK; }
};

Error invalid_argument(std::string message) { return {TF_INVALID_ARGUMENT, std::move(message)}; }

// A TF_Status of our own, for the C API's calls.
class Status {
 public:
  Status() : status_(TF_NewStatus()) {}
  explicit Status(const Error& error) : Status() { TF_SetStatus(status_, error.code, error.message.c_str()); }
  ~Status() { TF_DeleteStatus(status_); }
  Status(const Status&) = delete;
  Status& operator=(const Status&) = delete;

  TF_Status* get() const { return status_; }
  Error error(const std::string& what) const {
    if (TF_GetCode(status_) == TF_OK) return {};
    return {TF_GetCode(status_), what + ": " + TF_Message(status_)};
  }

 private:
  TF_Status* status_;
};

// A TF_Tensor the C API handed us (an input, an allocated output): a
// reference to TensorFlow's buffer, released with the object.
struct TensorDeleter {
  void operator()(TF_Tensor* t) const { TF_DeleteTensor(t); }
};
using Tensor = std::unique_ptr<TF_Tensor, TensorDeleter>;

std::vector<int64_t> dims_of(const TF_Tensor* t) {
  std::vector<int64_t> dims(TF_NumDims(t));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = TF_Dim(t, static_cast<int>(i));
  return dims;
}

// edt::DataType's number for a TensorFlow type.
Error engine_dtype(TF_DataType dtype, int* out) {
  static const std::map<TF_DataType, DataType> carried = {
      {TF_FLOAT, DataType::kFloat32}, {TF_DOUBLE, DataType::kFloat64}, {TF_HALF, DataType::kFloat16},
      {TF_BFLOAT16, DataType::kBFloat16}, {TF_INT32, DataType::kInt32}, {TF_INT64, DataType::kInt64},
      {TF_UINT8, DataType::kUInt8}};
  auto it = carried.find(dtype);
  if (it == carried.end()) {
    return invalid_argument("edt cannot communicate tensors of TensorFlow's type " + std::to_string(dtype) +
                            "; use float16/32/64, bfloat16, int32, int64 or uint8");
  }
  *out = static_cast<int>(it->second);
  return {};
}

// An edt error as TensorFlow's (see the notes on top). The engine reports
// a disagreement between ranks as InvalidArgument when the request
// completes (`negotiated`); a collective that failed while it ran is
// Unknown, which Horovod's elastic mode turns into HorovodInternalError.
Error to_error(const std::string& what, const PortError& e, bool negotiated) {
  std::string message = "edt " + what + ": " + e.message;
  if (e.code == "InvalidArgument" && !negotiated) return invalid_argument(message);
  if (e.code == "InvalidArgument" || e.code == "FailedPrecondition") return {TF_FAILED_PRECONDITION, message};
  return {TF_UNKNOWN, message + " [" + e.code + "]"};
}

// An op's attributes, read when TensorFlow makes its kernel.
struct Kernel {
  int type = 0;
  std::string node_name;
  std::string tensor_name;
  int process_set_id = 0;
  int reduce_op = 0;
  float prescale = 1.0f;
  float postscale = 1.0f;
  int root = 0;

  const std::string& request_name() const { return tensor_name.empty() ? node_name : tensor_name; }
};

// Reads attribute `name` of the kernel being made, unless an earlier read
// failed (`st` then keeps that failure).
class AttrReader {
 public:
  explicit AttrReader(TF_OpKernelConstruction* c) : c_(c) {}

  void read(const char* name, int* value) {
    if (ok()) TF_OpKernelConstruction_GetAttrInt32(c_, name, value, st_.get());
  }
  void read(const char* name, float* value) {
    if (ok()) TF_OpKernelConstruction_GetAttrFloat(c_, name, value, st_.get());
  }
  void read(const char* name, std::string* value) {
    int32_t list_size = 0, total_size = 0;
    if (ok()) TF_OpKernelConstruction_GetAttrSize(c_, name, &list_size, &total_size, st_.get());
    if (!ok() || total_size <= 0) return;
    value->resize(total_size);
    TF_OpKernelConstruction_GetAttrString(c_, name, value->data(), total_size, st_.get());
  }
  Error error(const std::string& what) const { return st_.error(what); }

 private:
  bool ok() const { return TF_GetCode(st_.get()) == TF_OK; }

  TF_OpKernelConstruction* c_;
  Status st_;
};

Error read_attrs(TF_OpKernelConstruction* c, Kernel* k) {
  const TF_StringView name = TF_OpKernelConstruction_GetName(c);
  k->node_name.assign(name.data, name.len);
  AttrReader attrs(c);
  attrs.read("tensor_name", &k->tensor_name);
  attrs.read("process_set_id", &k->process_set_id);
  if (k->type == kAllreduce || k->type == kReducescatter) {
    attrs.read("reduce_op", &k->reduce_op);
    attrs.read("prescale_factor", &k->prescale);
    attrs.read("postscale_factor", &k->postscale);
  }
  if (k->type == kBroadcast) attrs.read("root_rank", &k->root);
  return attrs.error("edt op " + k->node_name);
}

template <int kType>
void* create_kernel(TF_OpKernelConstruction* c) {
  auto* k = new Kernel;
  k->type = kType;
  if (Error e = read_attrs(c, k); !e.ok()) TF_OpKernelConstruction_Failure(c, Status(e).get());
  return k;
}

void delete_kernel(void* kernel) { delete static_cast<Kernel*>(kernel); }

// One run of an op: its request, and the tensors whose buffers the engine
// reads or writes, held until the request completes.
struct Run {
  const Kernel* kernel;
  TF_OpKernelContext* ctx;
  std::shared_ptr<EnginePort> engine;
  PortRequest request;
  Tensor input;
  Tensor output;

  const std::string& name() const { return kernel->node_name; }
};

// The request's dtype and shape: input 0's, which the run holds.
Error describe_input(Run& run) {
  TF_Tensor* input = nullptr;
  Status st;
  TF_GetInput(run.ctx, 0, &input, st.get());
  if (Error e = st.error("edt op " + run.name()); !e.ok()) return e;
  run.input.reset(input);
  run.request.shape = dims_of(input);
  return engine_dtype(TF_TensorType(input), &run.request.dtype);
}

// The input, which the engine reads and answers with a buffer of its own.
Error read_only_input(Run& run) {
  if (Error e = describe_input(run); !e.ok()) return e;
  run.request.data = TF_TensorData(run.input.get());
  return {};
}

// The output the engine reduces or overwrites in place: the input's buffer
// when TensorFlow lets it be reused, else a copy of it.
Error in_place_output(Run& run) {
  if (Error e = describe_input(run); !e.ok()) return e;
  const int candidates[] = {0};
  int forwarded = -1;
  Status st;
  TF_Tensor* output =
      TF_ForwardInputOrAllocateOutput(run.ctx, candidates, 1, 0, run.request.shape.data(),
                                      static_cast<int>(run.request.shape.size()), &forwarded, st.get());
  if (Error e = st.error("edt op " + run.name()); !e.ok()) return e;
  run.output.reset(output);
  void* in = TF_TensorData(run.input.get());
  void* out = TF_TensorData(output);
  const size_t bytes = TF_TensorByteSize(run.input.get());
  if (out != in && bytes > 0) std::memcpy(out, in, bytes);
  run.request.data = out;
  return {};
}

// Output `index` of the op, of `dims` and `dtype`, filled with `bytes`.
Error set_output(const Run& run, int index, TF_DataType dtype, const std::vector<int64_t>& dims,
                 const void* bytes, size_t size) {
  Status st;
  Tensor output(TF_AllocateOutput(run.ctx, index, dtype, dims.data(), static_cast<int>(dims.size()), size, st.get()));
  if (Error e = st.error("edt op " + run.name()); !e.ok()) return e;
  if (TF_TensorByteSize(output.get()) != size) {
    return {TF_INTERNAL, "edt " + run.name() + ": the engine returned " + std::to_string(size) +
                             " bytes for an output of " + std::to_string(TF_TensorByteSize(output.get()))};
  }
  if (size > 0) std::memcpy(TF_TensorData(output.get()), bytes, size);
  return {};
}

// The engine's output buffer (allgather, alltoall, reducescatter) as output 0.
Error engine_output(const Run& run, const PortOutput& out) {
  return set_output(run, 0, TF_TensorType(run.input.get()), out.shape, out.data.data(), out.data.size());
}

// Rows splits[d] of the input (consecutive, by destination) go to rank d
// of the process set; empty splits divide the first dimension evenly.
Error alltoall_splits(Run& run) {
  TF_Tensor* raw = nullptr;
  Status st;
  TF_GetInput(run.ctx, 1, &raw, st.get());
  if (Error e = st.error("edt op " + run.name()); !e.ok()) return e;
  Tensor splits(raw);
  if (const int64_t n = TF_TensorElementCount(raw); n > 0) {
    const auto* values = static_cast<const int32_t*>(TF_TensorData(raw));
    run.request.splits.assign(values, values + n);
    return {};
  }
  const int n = run.engine->size();
  if (run.request.shape[0] % n != 0) {
    return invalid_argument("edt alltoall " + run.name() + ": without splits the first dimension (" +
                            std::to_string(run.request.shape[0]) + ") must divide evenly among the " +
                            std::to_string(n) + " ranks; pass splits");
  }
  run.request.splits.assign(n, run.request.shape[0] / n);
  return {};
}

// Fills in the request's own fields and its buffer.
Error prepare(Run& run) {
  const Kernel& k = *run.kernel;
  run.request.name = k.request_name();
  run.request.type = k.type;
  run.request.op = k.reduce_op;
  run.request.prescale = k.prescale;
  run.request.postscale = k.postscale;
  run.request.root = k.root;
  switch (k.type) {
    case kAllreduce:
    case kBroadcast:
      return in_place_output(run);
    case kReducescatter:
      return read_only_input(run);
    case kAllgather:
    case kAlltoall: {
      if (Error e = read_only_input(run); !e.ok()) return e;
      if (run.request.shape.empty()) {
        const char* what = k.type == kAllgather ? "allgather" : "alltoall";
        return invalid_argument(std::string("edt ") + what + " " + run.name() + ": the tensor is a scalar; " + what +
                                " works on rows of the first dimension, so give it one (tf.reshape)");
      }
      return k.type == kAlltoall ? alltoall_splits(run) : Error{};
    }
    case kBarrier:
      run.request.dtype = static_cast<int>(DataType::kUInt8);
      run.request.shape = {0};
      return {};
    default:  // kJoin
      return {};
  }
}

// Makes the outputs from what the engine returned.
Error finish(const Run& run, const PortOutput& out) {
  switch (run.kernel->type) {
    case kAllgather:
    case kReducescatter:
      return engine_output(run, out);
    case kAlltoall: {
      if (Error e = engine_output(run, out); !e.ok()) return e;
      const std::vector<int32_t> received(out.recv_splits.begin(), out.recv_splits.end());
      return set_output(run, 1, TF_INT32, {static_cast<int64_t>(received.size())}, received.data(),
                        received.size() * sizeof(int32_t));
    }
    case kJoin: {
      const int32_t last = out.last_joined_rank;
      return set_output(run, 0, TF_INT32, {}, &last, sizeof(last));
    }
    default:  // in place, or no output
      return {};
  }
}

Error not_adopted(const Kernel& k) {
  if (k.process_set_id == 0) {
    return {TF_FAILED_PRECONDITION,
            "edt is not initialized (op " + k.node_name + "): call hvd.init() before running edt's collectives"};
  }
  return {TF_FAILED_PRECONDITION, "edt op " + k.node_name + ": process set " + std::to_string(k.process_set_id) +
                                      " is not registered on this rank (hvd.add_process_set)"};
}

// TensorFlow's C kernels hand the compute function the address of the
// executor's DoneCallback (AsyncOpKernel::DoneCallback, a
// std::function<void()>: tensorflow/c/kernels.cc), which lives only until
// the compute function returns. An op that completes later moves it out
// into a std::function of its own; libstdc++ keeps std::function's layout
// stable across its versions, which is what lets this build and
// TensorFlow's share it.
using DoneCallback = std::function<void()>;

DoneCallback take_done(TF_AsyncOpKernelDoneCallback* done) {
  return std::move(*reinterpret_cast<DoneCallback*>(done));
}

void complete(TF_OpKernelContext* ctx, const Error& error, const DoneCallback& done) {
  if (!error.ok()) TF_OpKernelContext_Failure(ctx, Status(error).get());
  done();
}

void compute_async(void* kernel, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* tf_done) {
  DoneCallback done = take_done(tf_done);
  auto run = std::make_shared<Run>();
  run->kernel = static_cast<const Kernel*>(kernel);
  run->ctx = ctx;
  run->engine = current_port(run->kernel->process_set_id);
  if (run->engine == nullptr) return complete(ctx, not_adopted(*run->kernel), done);
  if (Error e = prepare(*run); !e.ok()) return complete(ctx, e, done);
  PortError error;
  const int64_t handle = run->kernel->type == kJoin ? run->engine->submit_join(&error)
                                                     : run->engine->submit(run->request, &error);
  if (handle < 0) return complete(ctx, to_error(run->request.name, error, false), done);
  waiters().run([run, handle, done = std::move(done)] {
    PortOutput output;
    PortError failure;
    const bool ok = run->engine->wait(handle, &output, &failure);
    complete(run->ctx, ok ? finish(*run, output) : to_error(run->request.name, failure, true), done);
  });
}

}  // namespace
}  // namespace edt::python::tf_ops

// Takes over the std::shared_ptr<EnginePort> at `holder` (engine_port.h) as
// the engine of process set `process_set_id` (0: the whole job); null
// withdraws that set's port, and process_set_id -1 withdraws every port.
// Called by edt.tensorflow through ctypes.
extern "C" __attribute__((visibility("default"))) void edt_tf_adopt_port(int process_set_id, void* holder) {
  using edt::python::EnginePort;
  namespace ops = edt::python::tf_ops;
  std::shared_ptr<EnginePort> taken;
  if (holder != nullptr) {
    auto* owned = static_cast<std::shared_ptr<EnginePort>*>(holder);
    taken = std::move(*owned);
    delete owned;
  }
  std::map<int, std::shared_ptr<EnginePort>> released;
  {
    std::lock_guard<std::mutex> lock(ops::port_mu);
    if (process_set_id < 0) {
      released.swap(ops::ports);
    } else if (taken != nullptr) {
      ops::ports[process_set_id].swap(taken);
    } else {
      ops::ports.erase(process_set_id);
    }
  }
  // The previous ports are released here, outside no lock the engine needs.
}

// The ops' definitions and kernels, registered when tf.load_op_library
// loads this object.
namespace edt::python::tf_ops {
namespace {

constexpr const char* kTypes = "T: {int32, int64, float16, float32, float64, bfloat16, uint8}";

// Shape functions. An unset shape handle is a shape of unknown rank, which
// WithRank turns into the vector of unknown length that ops.h has no
// constructor for.
void same_shape(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  TF_ShapeHandle* input = TF_NewShapeHandle();
  TF_ShapeInferenceContextGetInput(ctx, 0, input, status);
  if (TF_GetCode(status) == TF_OK) TF_ShapeInferenceContextSetOutput(ctx, 0, input, status);
  TF_DeleteShapeHandle(input);
}

void unknown_vector(TF_ShapeInferenceContext* ctx, TF_ShapeHandle* out, TF_Status* status) {
  TF_ShapeHandle* unknown = TF_NewShapeHandle();
  TF_ShapeInferenceContextWithRank(ctx, unknown, 1, out, status);
  TF_DeleteShapeHandle(unknown);
}

// The input's shape with an unknown first dimension (allgather, alltoall,
// reducescatter), and for alltoall a vector of unknown length.
void first_dim_unknown(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  TF_ShapeHandle* input = TF_NewShapeHandle();
  TF_ShapeHandle* rest = TF_NewShapeHandle();
  TF_ShapeHandle* first = TF_NewShapeHandle();
  TF_ShapeHandle* output = TF_NewShapeHandle();
  TF_ShapeInferenceContextGetInput(ctx, 0, input, status);
  if (TF_GetCode(status) == TF_OK) TF_ShapeInferenceContextWithRankAtLeast(ctx, input, 1, input, status);
  if (TF_GetCode(status) == TF_OK) TF_ShapeInferenceContextSubshape(ctx, input, 1, INT64_MAX, rest, status);
  if (TF_GetCode(status) == TF_OK) unknown_vector(ctx, first, status);
  if (TF_GetCode(status) == TF_OK) TF_ShapeInferenceContextConcatenateShapes(ctx, first, rest, output, status);
  if (TF_GetCode(status) == TF_OK) TF_ShapeInferenceContextSetOutput(ctx, 0, output, status);
  if (TF_GetCode(status) == TF_OK && TF_ShapeInferenceContextNumInputs(ctx) == 2) {
    TF_ShapeInferenceContextSetOutput(ctx, 1, first, status);
  }
  for (TF_ShapeHandle* h : {input, rest, first, output}) TF_DeleteShapeHandle(h);
}

void scalar(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  TF_ShapeHandle* s = TF_ShapeInferenceContextScalar(ctx);
  TF_ShapeInferenceContextSetOutput(ctx, 0, s, status);
  TF_DeleteShapeHandle(s);
}

void no_outputs(TF_ShapeInferenceContext*, TF_Status* status) { TF_SetStatus(status, TF_OK, ""); }

struct OpSpec {
  const char* name;
  std::vector<std::string> attrs;  // besides tensor_name and process_set_id
  std::vector<const char*> inputs;
  std::vector<const char*> outputs;
  void (*shape)(TF_ShapeInferenceContext*, TF_Status*);
  bool stateful;
  void* (*create)(TF_OpKernelConstruction*);
  const char* host_memory;  // an input the kernel reads on the host, or null
};

const std::vector<std::string> kReduceAttrs = {kTypes, "reduce_op: int", "prescale_factor: float = 1.0",
                                               "postscale_factor: float = 1.0"};

std::vector<OpSpec> op_specs() {
  return {
      {"EdtAllreduce", kReduceAttrs, {"tensor: T"}, {"reduced: T"}, same_shape, false, create_kernel<kAllreduce>,
       nullptr},
      {"EdtBroadcast", {kTypes, "root_rank: int"}, {"tensor: T"}, {"output: T"}, same_shape, false,
       create_kernel<kBroadcast>, nullptr},
      {"EdtAllgather", {kTypes}, {"tensor: T"}, {"output: T"}, first_dim_unknown, false, create_kernel<kAllgather>,
       nullptr},
      {"EdtAlltoall", {kTypes}, {"tensor: T", "splits: int32"}, {"output: T", "received_splits: int32"},
       first_dim_unknown, false, create_kernel<kAlltoall>, "splits"},
      {"EdtReducescatter", kReduceAttrs, {"tensor: T"}, {"output: T"}, first_dim_unknown, false,
       create_kernel<kReducescatter>, nullptr},
      {"EdtBarrier", {}, {}, {}, no_outputs, true, create_kernel<kBarrier>, nullptr},
      {"EdtJoin", {}, {}, {"last_joined_rank: int32"}, scalar, true, create_kernel<kJoin>, nullptr},
  };
}

Error register_op(const OpSpec& spec) {
  TF_OpDefinitionBuilder* op = TF_NewOpDefinitionBuilder(spec.name);
  for (const auto& attr : spec.attrs) TF_OpDefinitionBuilderAddAttr(op, attr.c_str());
  TF_OpDefinitionBuilderAddAttr(op, "tensor_name: string = ''");
  TF_OpDefinitionBuilderAddAttr(op, "process_set_id: int = 0");
  for (const char* input : spec.inputs) TF_OpDefinitionBuilderAddInput(op, input);
  for (const char* output : spec.outputs) TF_OpDefinitionBuilderAddOutput(op, output);
  // TensorFlow's C API marks the op stateful whatever the flag says, so it
  // is called only for the ops that are. A stateful op runs in program
  // order inside tf.function (automatic control dependencies): the
  // gradients' allreduces would run one after the other, each waiting for
  // the one before, never fused and never beside the backward pass.
  if (spec.stateful) TF_OpDefinitionBuilderSetIsStateful(op, true);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(op, spec.shape);
  Status st;
  TF_RegisterOpDefinition(op, st.get());  // takes the builder
  if (Error e = st.error(std::string("register op ") + spec.name); !e.ok()) return e;
  TF_KernelBuilder* kernel = TF_NewAsyncKernelBuilder(spec.name, "CPU", spec.create, compute_async, delete_kernel);
  if (spec.host_memory != nullptr) TF_KernelBuilder_HostMemory(kernel, spec.host_memory);
  TF_RegisterKernelBuilder(spec.name, kernel, st.get());  // takes the builder
  return st.error(std::string("register the CPU kernel of ") + spec.name);
}

// An op that did not register is missing from the module
// tf.load_op_library returns, which edt.tensorflow reports on import.
bool register_all() {
  for (const OpSpec& spec : op_specs())
    if (Error e = register_op(spec); !e.ok()) std::fprintf(stderr, "edt's TensorFlow ops: %s\n", e.message.c_str());
  return true;
}

[[maybe_unused]] const bool registered = register_all();

}  // namespace
}  // namespace edt::python::tf_ops
