// edt's collectives as TensorFlow ops: EdtAllreduce, EdtAllgather and
// EdtBroadcast, which edt.tensorflow (horovod.tensorflow) wraps. Graph ops,
// so they run inside tf.function as well as eagerly; CPU tensors.
//
// Built against the installed TensorFlow's headers (tf.sysconfig) into
// _edt_tf_ops.so, loaded with tf.load_op_library. The ops reach the engine
// of edt's current Runtime through an EnginePort (../engine_port.h) that
// edt.tensorflow hands over with edt_tf_adopt_port(); this object links no
// part of libedt. Before a port is handed over, or after it was withdrawn
// (hvd.shutdown()), every op fails with FailedPrecondition.
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
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
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

std::mutex port_mu;
std::shared_ptr<EnginePort> port;  // guarded by port_mu

std::shared_ptr<EnginePort> current_port() {
  std::lock_guard<std::mutex> lock(port_mu);
  return port;
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

// An edt error as TensorFlow's: refusals keep their kind; a collective that
// failed while it ran is Unknown, as Horovod reports it (its elastic mode
// turns that into HorovodInternalError).
tf::Status to_status(const std::string& what, const PortError& e) {
  std::string message = "edt " + what + ": " + e.message;
  if (e.code == "InvalidArgument") return tf::errors::InvalidArgument(message);
  if (e.code == "FailedPrecondition") return tf::errors::FailedPrecondition(message);
  return tf::errors::Unknown(message, " [", e.code, "]");
}

class EdtCollective : public tf::AsyncOpKernel {
 public:
  EdtCollective(tf::OpKernelConstruction* c, int type) : AsyncOpKernel(c), type_(type) {
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &tensor_name_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    std::shared_ptr<EnginePort> engine = current_port();
    OP_REQUIRES_ASYNC(ctx, engine != nullptr,
                      tf::errors::FailedPrecondition("edt is not initialized (op ", name(),
                                                     "): call hvd.init() before running edt's collectives"),
                      done);
    const tf::Tensor& input = ctx->input(0);
    PortRequest request;
    request.name = tensor_name_.empty() ? name() : tensor_name_;
    request.type = type_;
    OP_REQUIRES_OK_ASYNC(ctx, engine_dtype(input.dtype(), &request.dtype), done);
    for (int64_t d : input.shape().dim_sizes()) request.shape.push_back(d);
    OP_REQUIRES_OK_ASYNC(ctx, prepare(ctx, &request), done);
    PortError error;
    const int64_t handle = engine->submit(request, &error);
    OP_REQUIRES_ASYNC(ctx, handle >= 0, to_status(request.name, error), done);
    std::string what = request.name;
    waiters().run([this, ctx, done = std::move(done), engine, handle, what] {
      PortOutput output;
      PortError failure;
      if (engine->wait(handle, &output, &failure)) {
        ctx->SetStatus(finish(ctx, output));
      } else {
        ctx->SetStatus(to_status(what, failure));
      }
      done();
    });
  }

 protected:
  // Fills in the request's own fields and its buffer.
  virtual tf::Status prepare(tf::OpKernelContext* ctx, PortRequest* request) = 0;
  // Makes the outputs from what the engine returned.
  virtual tf::Status finish(tf::OpKernelContext*, const PortOutput&) { return tf::OkStatus(); }

  // The output the engine reduces or overwrites in place: the input's
  // buffer when TensorFlow lets it be reused, else a copy of it.
  static tf::Status in_place_output(tf::OpKernelContext* ctx, PortRequest* request) {
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
  const int type_;
  std::string tensor_name_;
};

class EdtAllreduceOp : public EdtCollective {
 public:
  explicit EdtAllreduceOp(tf::OpKernelConstruction* c) : EdtCollective(c, kAllreduce) {
    OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &reduce_op_));
    OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &prescale_));
    OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &postscale_));
  }

 protected:
  tf::Status prepare(tf::OpKernelContext* ctx, PortRequest* request) override {
    request->op = reduce_op_;
    request->prescale = prescale_;
    request->postscale = postscale_;
    return in_place_output(ctx, request);
  }

 private:
  int reduce_op_ = 0;
  float prescale_ = 1.0f;
  float postscale_ = 1.0f;
};

class EdtBroadcastOp : public EdtCollective {
 public:
  explicit EdtBroadcastOp(tf::OpKernelConstruction* c) : EdtCollective(c, kBroadcast) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root_));
  }

 protected:
  tf::Status prepare(tf::OpKernelContext* ctx, PortRequest* request) override {
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
  tf::Status prepare(tf::OpKernelContext* ctx, PortRequest* request) override {
    if (ctx->input(0).dims() == 0) {
      return tf::errors::InvalidArgument("edt allgather ", name(), ": the tensor is a scalar; allgather "
                                         "concatenates along the first dimension, so give it one (tf.reshape)");
    }
    // The engine reads the input and writes a buffer of its own.
    request->data = const_cast<char*>(ctx->input(0).tensor_data().data());
    return tf::OkStatus();
  }

  tf::Status finish(tf::OpKernelContext* ctx, const PortOutput& out) override {
    tf::TensorShape shape;
    for (int64_t d : out.shape) TF_RETURN_IF_ERROR(shape.AddDimWithStatus(d));
    tf::Tensor* output = nullptr;
    TF_RETURN_IF_ERROR(ctx->allocate_output(0, shape, &output));
    if (output->TotalBytes() != out.data.size()) {
      return tf::errors::Internal("edt allgather ", name(), ": the engine returned ", out.data.size(),
                                  " bytes for shape ", shape.DebugString());
    }
    if (!out.data.empty()) std::memcpy(output->data(), out.data.data(), out.data.size());
    return tf::OkStatus();
  }
};

}  // namespace
}  // namespace edt::python::tf_ops

// Takes over the std::shared_ptr<EnginePort> at `holder` (engine_port.h) as
// the ops' engine; null withdraws the current one. Called by edt.tensorflow
// through ctypes.
extern "C" __attribute__((visibility("default"))) void edt_tf_adopt_port(void* holder) {
  using edt::python::EnginePort;
  std::shared_ptr<EnginePort> taken;
  if (holder != nullptr) {
    auto* owned = static_cast<std::shared_ptr<EnginePort>*>(holder);
    taken = std::move(*owned);
    delete owned;
  }
  std::lock_guard<std::mutex> lock(edt::python::tf_ops::port_mu);
  edt::python::tf_ops::port.swap(taken);
  // The previous port is released here, outside no lock the engine needs.
}

namespace {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

#define EDT_TF_TYPES "T: {int32, int64, float16, float32, float64, bfloat16, uint8}"

REGISTER_OP("EdtAllreduce")
    .Attr(EDT_TF_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("reduced: T")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape)
    .Doc("The elementwise reduction of `tensor` over every rank (reduce_op: edt::ReduceOp).");

REGISTER_OP("EdtBroadcast")
    .Attr(EDT_TF_TYPES)
    .Attr("root_rank: int")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape)
    .Doc("root_rank's `tensor`, on every rank.");

REGISTER_OP("EdtAllgather")
    .Attr(EDT_TF_TYPES)
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle input;
      ShapeHandle output;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &input));
      TF_RETURN_IF_ERROR(c->ReplaceDim(input, 0, c->UnknownDim(), &output));
      c->set_output(0, output);
      return ::tensorflow::OkStatus();
    })
    .Doc("Every rank's `tensor`, concatenated along the first dimension in rank order.");

#undef EDT_TF_TYPES

REGISTER_KERNEL_BUILDER(Name("EdtAllreduce").Device(::tensorflow::DEVICE_CPU),
                        edt::python::tf_ops::EdtAllreduceOp);
REGISTER_KERNEL_BUILDER(Name("EdtBroadcast").Device(::tensorflow::DEVICE_CPU),
                        edt::python::tf_ops::EdtBroadcastOp);
REGISTER_KERNEL_BUILDER(Name("EdtAllgather").Device(::tensorflow::DEVICE_CPU),
                        edt::python::tf_ops::EdtAllgatherOp);

}  // namespace
