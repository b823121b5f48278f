// A rank for peer_failure_test: joins the group from the EDT_* environment
// and runs allreduces of EDT_TEST_COUNT floats until it is killed or one
// fails. Exits 0 only if told to stop after EDT_TEST_ITERS iterations.
#include <cstdlib>
#include <vector>

#include "common/log.h"
#include "edt/communicator.h"

int main() {
  edt::log::init("peer_failure_rank");
  auto comm = edt::Communicator::from_env();
  if (!comm.is_ok()) {
    edt::log::error("{}", comm.status().to_string());
    return 1;
  }
  const char* count_env = std::getenv("EDT_TEST_COUNT");
  const char* iters_env = std::getenv("EDT_TEST_ITERS");
  std::vector<float> buf(count_env ? std::strtoul(count_env, nullptr, 10) : 1024, 1.0f);
  long iters = iters_env ? std::strtol(iters_env, nullptr, 10) : -1;
  for (long i = 0; iters < 0 || i < iters; ++i) {
    edt::Status s = (*comm)->allreduce(buf.data(), buf.data(), buf.size(), edt::DataType::kFloat32,
                                       edt::ReduceOp::kSum);
    if (!s.is_ok()) {
      edt::log::error("{}", s.to_string());
      return 1;
    }
  }
  return 0;
}
