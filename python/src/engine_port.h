// EnginePort: the engine of one edt._edt.Runtime as another shared object
// of the process sees it: edt's TensorFlow ops (python/src/tensorflow),
// built against TensorFlow's headers in C++17 and linked to no part of
// libedt. Only standard types cross, so the two objects share nothing but
// this header and libstdc++.
//
// Handing over: Runtime.engine_port() (module.cc) returns the address of a
// new std::shared_ptr<EnginePort>; the receiver takes it over (moves it out
// and deletes the holder). The port keeps the engine alive while the
// receiver holds it; once the Runtime shut the engine down, submit() and
// wait() fail with the engine's error.
//
// Numbers are the engine's: type is engine::OpType, dtype edt::DataType,
// op edt::ReduceOp (include/edt/types.h, src/engine/request.h).
//
// Threads: every method may be called from any thread, without the GIL.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace edt::python {

struct PortRequest {
  std::string name;  // the same on every rank (the engine negotiates by name)
  int type = 0;
  int dtype = 0;
  int op = 0;
  int root = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<int64_t> shape;
  std::vector<int64_t> splits;
  void* data = nullptr;  // reduced or overwritten in place; alive until wait() returns
};

struct PortOutput {
  std::vector<uint8_t> data;  // allgather, alltoall, reducescatter
  std::vector<int64_t> shape;
  std::vector<int64_t> recv_splits;
  int last_joined_rank = -1;  // join
};

// Why a call failed: edt's status code name ("InvalidArgument", ...) and
// its message.
struct PortError {
  std::string code;
  std::string message;
};

class EnginePort {
 public:
  virtual ~EnginePort() = default;
  // The handle, or -1 with *error set (the request was refused).
  virtual int64_t submit(const PortRequest& request, PortError* error) = 0;
  // This rank's join (Horovod's hvd.join()): the handle, or -1 with *error
  // set; wait() then reports the rank that joined last.
  virtual int64_t submit_join(PortError* error) = 0;
  // Waits for the handle's request; false with *error set when it failed.
  virtual bool wait(int64_t handle, PortOutput* output, PortError* error) = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
};

}  // namespace edt::python
