// edtrun-probe: a worker for the launcher's integration tests. It forms a
// Communicator from the environment edtrun sets, checks that libedt sees the
// placement edtrun announced, and runs an allreduce. Exit code 0 and one line
// "rank R/S local L/LS host H transport T sum X" on success; a message and
// exit code 1 otherwise. It is also the program tests/packaging builds
// against the installed package, so it uses the public API (include/edt) only.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "edt/communicator.h"

namespace {

int env_int(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : -1;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "edtrun-probe: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main() {
  auto made = edt::Communicator::from_env();
  if (!made.is_ok()) return fail(made.status().to_string());
  edt::Communicator& comm = *made.value();
  struct {
    const char* variable;
    int seen;
  } checks[] = {{"EDT_RANK", comm.rank()}, {"EDT_SIZE", comm.size()}, {"EDT_LOCAL_RANK", comm.local_rank()},
                {"EDT_LOCAL_SIZE", comm.local_size()}};
  for (const auto& check : checks) {
    if (env_int(check.variable) != check.seen) {
      return fail(std::string(check.variable) + " is " + std::to_string(env_int(check.variable)) +
                  " but the communicator has " + std::to_string(check.seen));
    }
  }
  float value = static_cast<float>(comm.rank() + 1);
  edt::Status status = comm.allreduce(&value, &value, 1, edt::DataType::kFloat32, edt::ReduceOp::kSum);
  if (!status.is_ok()) return fail(status.to_string());
  std::printf("rank %d/%d local %d/%d host %s transport %s sum %g\n", comm.rank(), comm.size(), comm.local_rank(),
              comm.local_size(), comm.host().c_str(), comm.transport_name().c_str(), static_cast<double>(value));
  return 0;
}
