// A peer process that dies mid-collective: the survivor must get kPeerFailed
// naming the dead rank within seconds, over shared memory and over TCP. The
// other rank is a real process (peer_failure_rank) killed with SIGKILL.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "edt/communicator.h"
#include "edt/tcp_store.h"

namespace edt {
namespace {

using namespace std::chrono_literals;

struct Case {
  const char* name;
  const char* child_host;
  const char* transport;
  size_t count;
};

class PeerFailure : public ::testing::TestWithParam<Case> {};

// The environment is built before fork(): between fork and exec the child
// of a threaded process may only call async-signal-safe functions.
pid_t spawn_rank(uint16_t port, const Case& c) {
  std::vector<std::string> env = {"EDT_RANK=1",
                                  "EDT_SIZE=2",
                                  "EDT_COORDINATOR=127.0.0.1:" + std::to_string(port),
                                  std::string("EDT_HOSTNAME=") + c.child_host,
                                  std::string("EDT_TRANSPORT=") + c.transport,
                                  "EDT_TEST_COUNT=" + std::to_string(c.count)};
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(EDT_PEER_FAILURE_RANK), nullptr};
  pid_t pid = fork();
  if (pid == 0) {
    execve(EDT_PEER_FAILURE_RANK, argv, envp.data());
    _exit(127);
  }
  return pid;
}

TEST_P(PeerFailure, SurvivorErrsWithinSecondsNamingTheDeadRank) {
  const Case& c = GetParam();
  auto server = TcpStoreServer::start({.host = "127.0.0.1", .port = 0});
  ASSERT_TRUE(server.is_ok()) << server.status().to_string();
  pid_t child = spawn_rank((*server)->port(), c);
  ASSERT_GT(child, 0);
  auto store = std::make_shared<PrefixStore>("edt/generation/0", (*server)->local_store());
  CommunicatorOptions o;
  o.rank = 0;
  o.size = 2;
  o.host = "127.0.0.1";  // an address: a made-up name would go to DNS, which may take seconds
  o.transport = c.transport;
  o.timeout = 60s;  // far beyond the bound below: only failure detection may end the wait
  auto comm = Communicator::create(store, o);
  ASSERT_TRUE(comm.is_ok()) << comm.status().to_string();

  std::vector<float> buf(c.count, 1.0f);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE((*comm)->allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum).is_ok());
  std::atomic<int64_t> killed_at{0};
  std::thread killer([&] {
    std::this_thread::sleep_for(200ms);
    killed_at = std::chrono::steady_clock::now().time_since_epoch().count();
    kill(child, SIGKILL);
  });
  Status s;
  for (int i = 0; i < 1000000 && s.is_ok(); ++i)
    s = (*comm)->allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
  auto failed_at = std::chrono::steady_clock::now();
  killer.join();
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));

  EXPECT_EQ(s.code(), StatusCode::kPeerFailed) << s.to_string();
  std::printf("survivor's error: %s\n", s.to_string().c_str());
  EXPECT_NE(s.message().find("rank 1 (host " + std::string(c.child_host) + ")"), std::string::npos) << s.message();
  auto waited = failed_at - std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(killed_at.load()));
  EXPECT_LT(waited, 3s) << "the survivor took "
                        << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms";
  // Broken for good: the next op fails at once.
  EXPECT_EQ((*comm)->barrier().code(), StatusCode::kPeerFailed);
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerFailure,
                         ::testing::Values(Case{"shm_small", "127.0.0.1", "auto", 1000},
                                           Case{"shm_large", "127.0.0.1", "auto", 4 << 20},
                                           Case{"tcp_small", "127.0.0.2", "auto", 1000},
                                           Case{"tcp_large", "127.0.0.1", "tcp", 4 << 20}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace edt
