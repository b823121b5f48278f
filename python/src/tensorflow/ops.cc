// edt's collectives as TensorFlow ops: EdtAllreduce, EdtAllgather,
// EdtBroadcast, EdtAlltoall, EdtReducescatter, EdtBarrier and EdtJoin,
// which edt.tensorflow (horovod.tensorflow) wraps. Graph ops, so they run
// inside tf.function as well as eagerly; CPU tensors.
//
// Built against the installed TensorFlow's headers (tf.sysconfig) into
// _edt_tf_ops.so, loaded with tf.load_op_library. The ops reach the engines
// of edt's current Runtime and of its process sets through EnginePorts
// (../engine_port.h), one per process set id, that edt.tensorflow hands over
// with edt_tf_adopt_port(); this object links no part of libedt. An op runs
// on the port of its process_set_id attribute (0: the whole job). Before a
// port is handed over, or after it was withdrawn (hvd.shutdown()), the op
// fails with FailedPrecondition.
//
// The kernels are asynchronous (AsyncOpKernel): ComputeAsync submits the
// request and returns; the waiter thread waits for it and completes the op,
// so TensorFlow's executor runs other ops meanwhile, and the engine fuses
// the requests that are pending together (a step's gradients).
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
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "../engine_port.h"
#include "edt/types.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace edt::python::tf_ops {
namespace {

namespace tf = ::tensorflow;
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

tf::Status carried(DataType type, int* out) {
  *out = static_cast<int>(type);
  return tf::OkStatus();
}

// edt::DataType's number for a TensorFlow type.
tf::Status engine_dtype(tf::DataType dtype, int* out) {
  switch (dtype) {
    case tf::DT_FLOAT: return carried(DataType::kFloat32, out);
    case tf::DT_DOUBLE: return carried(DataType::kFloat64, out);
    case tf::DT_HALF: return carried(DataType::kFloat16, out);
    case tf::DT_BFLOAT16: return carried(DataType::kBFloat16, out);
    case tf::DT_INT32: return carried(DataType::kInt32, out);
    case tf::DT_INT64: return carried(DataType::kInt64, out);
    case tf::DT_UINT8: return carried(DataType::kUInt8, out);
    default:
      return tf::errors::InvalidArgument("edt cannot communicate tensors of type ", tf::DataTypeString(dtype),
                                         "; use float16/32/64, bfloat16, int32, int64 or uint8");
  }
}

// An edt error as TensorFlow's (see the notes on top). The engine reports
// a disagreement between ranks as InvalidArgument when the request
// completes (`negotiated`); a collective that failed while it ran is
// Unknown, which Horovod's elastic mode turns into HorovodInternalError.
tf::Status to_status(const std::string& what, const PortError& e, bool negotiated) {
  std::string message = "edt " + what + ": " + e.message;
  if (e.code == "InvalidArgument" && !negotiated) return tf::errors::InvalidArgument(message);
  if (e.code == "InvalidArgument" || e.code == "FailedPrecondition") {
    return tf::errors::FailedPrecondition(message);
  }
  return tf::errors::Unknown(message, " [", e.code, "]");
}

// The engine's output buffer (allgather, alltoall, reducescatter) as output
// `index` of the op.
tf::Status output_from_engine(tf::OpKernelContext* ctx, int index, const PortOutput& out, const std::string& what) {
  tf::TensorShape shape;
  for (int64_t d : out.shape) TF_RETURN_IF_ERROR(shape.AddDimWithStatus(d));
  tf::Tensor* output = nullptr;
  TF_RETURN_IF_ERROR(ctx->allocate_output(index, shape, &output));
  if (output->TotalBytes() != out.data.size()) {
    return tf::errors::Internal("edt ", what, ": the engine returned ", out.data.size(), " bytes for shape ",
                                shape.DebugString());
  }
  if (!out.data.empty()) std::memcpy(output->data(), out.data.data(), out.data.size());
  return tf::OkStatus();
}

class EdtCollective : public tf::AsyncOpKernel {
 public:
  EdtCollective(tf::OpKernelConstruction* c, int type) : AsyncOpKernel(c), type_(type) {
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_id_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    std::shared_ptr<EnginePort> engine = current_port(process_set_id_);
    OP_REQUIRES_ASYNC(ctx, engine != nullptr, not_adopted(), done);
    PortRequest request;
    request.name = tensor_name_.empty() ? name() : tensor_name_;
    request.type = type_;
    OP_REQUIRES_OK_ASYNC(ctx, prepare(ctx, *engine, &request), done);
    PortError error;
    const int64_t handle = type_ == kJoin ? engine->submit_join(&error) : engine->submit(request, &error);
    OP_REQUIRES_ASYNC(ctx, handle >= 0, to_status(request.name, error, false), done);
    std::string what = request.name;
    waiters().run([this, ctx, done = std::move(done), engine, handle, what] {
      PortOutput output;
      PortError failure;
      if (engine->wait(handle, &output, &failure)) {
        ctx->SetStatus(finish(ctx, output));
      } else {
        ctx->SetStatus(to_status(what, failure, true));
      }
      done();
    });
  }

 protected:
  // Fills in the request's own fields and its buffer; `engine` is the
  // process set's (its size() is the number of ranks the op runs on).
  virtual tf::Status prepare(tf::OpKernelContext* ctx, const EnginePort& engine, PortRequest* request) = 0;
  // Makes the outputs from what the engine returned.
  virtual tf::Status finish(tf::OpKernelContext*, const PortOutput&) { return tf::OkStatus(); }

  // The request's dtype and shape: input 0's.
  static tf::Status describe_input(tf::OpKernelContext* ctx, PortRequest* request) {
    const tf::Tensor& input = ctx->input(0);
    for (int64_t d : input.shape().dim_sizes()) request->shape.push_back(d);
    return engine_dtype(input.dtype(), &request->dtype);
  }

  // The input, which the engine reads and answers with a buffer of its own.
  static tf::Status read_only_input(tf::OpKernelContext* ctx, PortRequest* request) {
    TF_RETURN_IF_ERROR(describe_input(ctx, request));
    request->data = const_cast<char*>(ctx->input(0).tensor_data().data());
    return tf::OkStatus();
  }

  // The output the engine reduces or overwrites in place: the input's
  // buffer when TensorFlow lets it be reused, else a copy of it.
  static tf::Status in_place_output(tf::OpKernelContext* ctx, PortRequest* request) {
    TF_RETURN_IF_ERROR(describe_input(ctx, request));
    const tf::Tensor& input = ctx->input(0);
    tf::Tensor* output = nullptr;
    TF_RETURN_IF_ERROR(ctx->forward_input_or_allocate_output({0}, 0, input.shape(), &output));
    if (output->data() != input.data() && input.TotalBytes() > 0) {
      std::memcpy(output->data(), input.data(), input.TotalBytes());
    }
    request->data = output->data();
    return tf::OkStatus();
  }

 private:
  tf::Status not_adopted() const {
    if (process_set_id_ == 0) {
      return tf::errors::FailedPrecondition("edt is not initialized (op ", name(),
                                            "): call hvd.init() before running edt's collectives");
    }
    return tf::errors::FailedPrecondition("edt op ", name(), ": process set ", process_set_id_,
                                          " is not registered on this rank (hvd.add_process_set)");
  }

  const int type_;
  std::string tensor_name_;
  int process_set_id_ = 0;
};

// A collective that reduces: its reduce_op and scale factor attributes.
class EdtReducing : public EdtCollective {
 public:
  EdtReducing(tf::OpKernelConstruction* c, int type) : EdtCollective(c, type) {
    OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &reduce_op_));
    OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &prescale_));
    OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &postscale_));
  }

 protected:
  void describe_reduction(PortRequest* request) const {
    request->op = reduce_op_;
    request->prescale = prescale_;
    request->postscale = postscale_;
  }

 private:
  int reduce_op_ = 0;
  float prescale_ = 1.0f;
  float postscale_ = 1.0f;
};

class EdtAllreduceOp : public EdtReducing {
 public:
  explicit EdtAllreduceOp(tf::OpKernelConstruction* c) : EdtReducing(c, kAllreduce) {}

 protected:
  tf::Status prepare(tf::OpKernelContext* ctx, const EnginePort&, PortRequest* request) override {
    describe_reduction(request);
    return in_place_output(ctx, request);
  }
};

class EdtBroadcastOp : public EdtCollective {
 public:
  explicit EdtBroadcastOp(tf::OpKernelConstruction* c) : EdtCollective(c, kBroadcast) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root_));
  }

 protected:
  tf::Status prepare(tf::OpKernelContext* ctx, const EnginePort&, PortRequest* request) override {
    request->root = root_;
    return in_place_output(ctx, request);
  }

 private:
  int root_ = 0;
};

class EdtAllgatherOp : public EdtCollective {
 public:
  explicit EdtAllgatherOp(tf::OpKernelConstruction* c) : EdtCollective(c, kAllgather) {}

 protected:
  tf::Status prepare(tf::OpKernelContext* ctx, const EnginePort&, PortRequest* request) override {
    if (ctx->input(0).dims() == 0) {
      return tf::errors::InvalidArgument("edt allgather ", name(), ": the tensor is a scalar; allgather "
                                         "concatenates along the first dimension, so give it one (tf.reshape)");
    }
    return read_only_input(ctx, request);
  }

  tf::Status finish(tf::OpKernelContext* ctx, const PortOutput& out) override {
    return output_from_engine(ctx, 0, out, name());
  }
};

// Rows splits[d] of the input (consecutive, by destination) go to rank d of
// the process set; empty splits divide the first dimension evenly. Outputs
// the rows received, in rank order, and how many came from each rank.
class EdtAlltoallOp : public EdtCollective {
 public:
  explicit EdtAlltoallOp(tf::OpKernelConstruction* c) : EdtCollective(c, kAlltoall) {}

 protected:
  tf::Status prepare(tf::OpKernelContext* ctx, const EnginePort& engine, PortRequest* request) override {
    TF_RETURN_IF_ERROR(read_only_input(ctx, request));
    if (request->shape.empty()) {
      return tf::errors::InvalidArgument("edt alltoall ", name(), ": the tensor is a scalar; alltoall sends rows "
                                         "of the first dimension, so give it one (tf.reshape)");
    }
    const tf::Tensor& splits = ctx->input(1);
    if (splits.NumElements() > 0) {
      auto values = splits.flat<int32_t>();
      request->splits.assign(values.data(), values.data() + values.size());
      return tf::OkStatus();
    }
    const int n = engine.size();
    if (request->shape[0] % n != 0) {
      return tf::errors::InvalidArgument("edt alltoall ", name(), ": without splits the first dimension (",
                                         request->shape[0], ") must divide evenly among the ", n,
                                         " ranks; pass splits");
    }
    request->splits.assign(n, request->shape[0] / n);
    return tf::OkStatus();
  }

  tf::Status finish(tf::OpKernelContext* ctx, const PortOutput& out) override {
    TF_RETURN_IF_ERROR(output_from_engine(ctx, 0, out, name()));
    tf::Tensor* received = nullptr;
    const int64_t n = static_cast<int64_t>(out.recv_splits.size());
    TF_RETURN_IF_ERROR(ctx->allocate_output(1, tf::TensorShape({n}), &received));
    auto values = received->flat<int32_t>();
    for (int64_t i = 0; i < n; ++i) values(i) = static_cast<int32_t>(out.recv_splits[i]);
    return tf::OkStatus();
  }
};

// The reduction over the process set, of which this rank keeps its rows of
// the first dimension (the first ranks one more when it does not divide).
class EdtReducescatterOp : public EdtReducing {
 public:
  explicit EdtReducescatterOp(tf::OpKernelConstruction* c) : EdtReducing(c, kReducescatter) {}

 protected:
  tf::Status prepare(tf::OpKernelContext* ctx, const EnginePort&, PortRequest* request) override {
    describe_reduction(request);
    return read_only_input(ctx, request);
  }

  tf::Status finish(tf::OpKernelContext* ctx, const PortOutput& out) override {
    return output_from_engine(ctx, 0, out, name());
  }
};

class EdtBarrierOp : public EdtCollective {
 public:
  explicit EdtBarrierOp(tf::OpKernelConstruction* c) : EdtCollective(c, kBarrier) {}

 protected:
  tf::Status prepare(tf::OpKernelContext*, const EnginePort&, PortRequest* request) override {
    request->dtype = static_cast<int>(DataType::kUInt8);
    request->shape = {0};
    return tf::OkStatus();
  }
};

// This rank has no more data: until every rank joined, the others'
// allreduces go on with it adding zeros. Outputs the rank that joined last.
class EdtJoinOp : public EdtCollective {
 public:
  explicit EdtJoinOp(tf::OpKernelConstruction* c) : EdtCollective(c, kJoin) {}

 protected:
  tf::Status prepare(tf::OpKernelContext*, const EnginePort&, PortRequest*) override { return tf::OkStatus(); }

  tf::Status finish(tf::OpKernelContext* ctx, const PortOutput& out) override {
    tf::Tensor* last = nullptr;
    TF_RETURN_IF_ERROR(ctx->allocate_output(0, tf::TensorShape({}), &last));
    last->scalar<int32_t>()() = out.last_joined_rank;
    return tf::OkStatus();
  }
};

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

namespace {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

#define EDT_TF_TYPES "T: {int32, int64, float16, float32, float64, bfloat16, uint8}"

::tensorflow::Status first_dim_unknown(InferenceContext* c) {
  ShapeHandle input;
  ShapeHandle output;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &input));
  TF_RETURN_IF_ERROR(c->ReplaceDim(input, 0, c->UnknownDim(), &output));
  c->set_output(0, output);
  return ::tensorflow::OkStatus();
}

REGISTER_OP("EdtAllreduce")
    .Attr(EDT_TF_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("reduced: T")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape)
    .Doc("The elementwise reduction of `tensor` over every rank (reduce_op: edt::ReduceOp).");

REGISTER_OP("EdtBroadcast")
    .Attr(EDT_TF_TYPES)
    .Attr("root_rank: int")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape)
    .Doc("root_rank's `tensor`, on every rank (root_rank: the process set's rank).");

REGISTER_OP("EdtAllgather")
    .Attr(EDT_TF_TYPES)
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(first_dim_unknown)
    .Doc("Every rank's `tensor`, concatenated along the first dimension in rank order.");

REGISTER_OP("EdtAlltoall")
    .Attr(EDT_TF_TYPES)
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Input("splits: int32")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(first_dim_unknown(c));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return ::tensorflow::OkStatus();
    })
    .Doc("Rows splits[d] of `tensor` to rank d; the rows every rank sent here, and how many from each.");

REGISTER_OP("EdtReducescatter")
    .Attr(EDT_TF_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(first_dim_unknown)
    .Doc("This rank's rows of the reduction of `tensor` over every rank.");

REGISTER_OP("EdtBarrier")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::NoOutputs)
    .Doc("Completes once every rank of the process set ran it.");

REGISTER_OP("EdtJoin")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Output("last_joined_rank: int32")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::ScalarShape)
    .Doc("This rank has no more data; completes once every rank joined, with the rank that joined last.");

#undef EDT_TF_TYPES

REGISTER_KERNEL_BUILDER(Name("EdtAllreduce").Device(::tensorflow::DEVICE_CPU),
                        edt::python::tf_ops::EdtAllreduceOp);
REGISTER_KERNEL_BUILDER(Name("EdtBroadcast").Device(::tensorflow::DEVICE_CPU),
                        edt::python::tf_ops::EdtBroadcastOp);
REGISTER_KERNEL_BUILDER(Name("EdtAllgather").Device(::tensorflow::DEVICE_CPU),
                        edt::python::tf_ops::EdtAllgatherOp);
REGISTER_KERNEL_BUILDER(Name("EdtAlltoall").Device(::tensorflow::DEVICE_CPU).HostMemory("splits"),
                        edt::python::tf_ops::EdtAlltoallOp);
REGISTER_KERNEL_BUILDER(Name("EdtReducescatter").Device(::tensorflow::DEVICE_CPU),
                        edt::python::tf_ops::EdtReducescatterOp);
REGISTER_KERNEL_BUILDER(Name("EdtBarrier").Device(::tensorflow::DEVICE_CPU), edt::python::tf_ops::EdtBarrierOp);
REGISTER_KERNEL_BUILDER(Name("EdtJoin").Device(::tensorflow::DEVICE_CPU), edt::python::tf_ops::EdtJoinOp);

}  // namespace
