#include "launcher/warm_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

namespace edt::launcher {
namespace {

using nlohmann::json;

WarmRequest request(std::vector<std::string> argv, std::vector<std::string> env) {
  WarmRequest r;
  r.argv = std::move(argv);
  r.env = std::move(env);
  return r;
}

TEST(WarmClient, PythonCommandsByName) {
  EXPECT_TRUE(is_python_command({"python3", "train.py"}));
  EXPECT_TRUE(is_python_command({"/usr/bin/python3.11", "-m", "x"}));
  EXPECT_TRUE(is_python_command({"python"}));
  EXPECT_FALSE(is_python_command({"python3-config"}));
  EXPECT_FALSE(is_python_command({"/usr/bin/pythonista"}));
  EXPECT_FALSE(is_python_command({"sh", "-c", "python3 x.py"}));
  EXPECT_FALSE(is_python_command({}));
}

TEST(WarmClient, SocketPathAndTurningItOff) {
  EXPECT_EQ(warm_socket_path({}), kWarmSocketInContainer);
  EXPECT_EQ(warm_socket_path({{"EDT_WARM_SOCKET", "/tmp/s.sock"}}), "/tmp/s.sock");
  for (const char* off : {"0", "off", "false"})
    EXPECT_EQ(warm_socket_path({{"EDT_WARM_START", off}, {"EDT_WARM_SOCKET", "/tmp/s.sock"}}), "") << off;
  EXPECT_EQ(warm_socket_path({{"EDT_WARM_START", "1"}}), kWarmSocketInContainer);
}

// A server that answers each request with `answers`, one message each, and
// checks what the client sent.
class FakeServer {
 public:
  explicit FakeServer(std::vector<json> answers) : answers_(std::move(answers)) {
    dir_ = std::filesystem::temp_directory_path() / ("edt-warm-client-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "s.sock").string();
    listener_ = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path_.c_str(), sizeof address.sun_path - 1);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(listen(listener_, 4), 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    thread_.join();
    close(listener_);
    std::filesystem::remove_all(dir_);
  }
  const std::string& path() const { return path_; }
  json request;
  int fds_received = 0;

 private:
  void serve() {
    int conn = accept(listener_, nullptr, nullptr);
    char buffer[65536];
    alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
    iovec iov{buffer, sizeof buffer};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(conn, &msg, 0);
    request = json::parse(std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0), nullptr, false);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      fds_received = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < fds_received; ++i) close(reinterpret_cast<int*>(CMSG_DATA(c))[i]);
    }
    for (const auto& answer : answers_) {
      const std::string bytes = answer.dump();
      send(conn, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    }
    close(conn);
  }

  std::vector<json> answers_;
  std::filesystem::path dir_;
  std::string path_;
  int listener_ = -1;
  std::thread thread_;
};

TEST(WarmClient, SendsArgvEnvironmentAndTheThreeStreams) {
  FakeServer server({json{{"started", 42}}, json{{"exit", 3}}});
  auto session = warm_start(server.path(), request({"python3", "t.py"}, {"A=1"}));
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  EXPECT_EQ(session->worker_pid, 42);
  auto end = relay_until_exit(*session, -1);
  ASSERT_TRUE(end.is_ok()) << end.status().to_string();
  EXPECT_EQ(end->code, 3);
  EXPECT_EQ(server.request, (json{{"argv", {"python3", "t.py"}}, {"env", {"A=1"}}}));
  EXPECT_EQ(server.fds_received, 3);
  close(session->fd);
}

TEST(WarmClient, AnotherContainerGetsItsHostDirectoryAndMarker) {
  // A worker in another container is not in the client's PID namespace: no pid.
  FakeServer server({json{{"started", nullptr}}, json{{"exit", 0}}});
  WarmRequest r = request({"python3", "t.py"}, {"A=1"});
  r.host = "tthvd-worker-1";
  r.cwd = "/root/data";
  r.marker = "edtrun: worker started";
  auto session = warm_start(server.path(), r);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  EXPECT_EQ(server.request, (json{{"argv", {"python3", "t.py"}}, {"env", {"A=1"}}, {"host", "tthvd-worker-1"},
                                  {"cwd", "/root/data"}, {"marker", "edtrun: worker started"}}));
  EXPECT_EQ(server.fds_received, 3);
  EXPECT_EQ(session->worker_pid, 0);
  close(session->fd);
}

TEST(WarmClient, TheWorkerVariableForARemoteStart) {
  auto variable = warm_worker_variable({"python3", "t.py"}, {{"A", "1"}}, "/root");
  ASSERT_TRUE(variable.has_value());
  ASSERT_EQ(variable->rfind("EDT_WARM_WORKER=", 0), 0u);
  EXPECT_EQ(json::parse(variable->substr(16)),
            (json{{"argv", {"python3", "t.py"}}, {"env", {"A=1"}}, {"cwd", "/root"}}));
  // JSON cannot carry bytes that are not UTF-8, nor the kernel a huge variable: ssh takes those.
  EXPECT_FALSE(warm_worker_variable({"python3", "t.py"}, {{"A", "\xff"}}, "/root").has_value());
  EXPECT_FALSE(warm_worker_variable({"python3", "t.py"}, {{"A", std::string(200000, 'x')}}, "/root").has_value());
}

TEST(WarmClient, ADeclineSaysWhy) {
  FakeServer server(std::vector<json>{json{{"cold", "the Python option -c is not served warm"}}});
  auto session = warm_start(server.path(), request({"python3", "-c", "1"}, {}));
  ASSERT_FALSE(session.is_ok());
  EXPECT_NE(session.status().message().find("-c is not served warm"), std::string::npos);
}

TEST(WarmClient, AWorkerKilledByASignal) {
  FakeServer killed({json{{"started", 7}}, json{{"killed", 9}}});
  auto session = warm_start(killed.path(), request({"python3", "t.py"}, {}));
  ASSERT_TRUE(session.is_ok());
  auto end = relay_until_exit(*session, -1);
  ASSERT_TRUE(end.is_ok());
  EXPECT_EQ(end->signal, 9);
  close(session->fd);
}

TEST(WarmClient, ARelayThatEndsWithoutTheStatusIsAnError) {
  FakeServer vanishing(std::vector<json>{json{{"started", 7}}});
  auto session = warm_start(vanishing.path(), request({"python3", "t.py"}, {}));
  ASSERT_TRUE(session.is_ok());
  auto end = relay_until_exit(*session, -1);
  ASSERT_FALSE(end.is_ok());
  EXPECT_NE(end.status().message().find("without the worker's status"), std::string::npos);
  close(session->fd);
}

TEST(WarmClient, NoServerIsAnError) {
  EXPECT_FALSE(warm_start("/nonexistent/edt-warm.sock", request({"python3", "t.py"}, {})).is_ok());
}

}  // namespace
}  // namespace edt::launcher
