#include "launcher/warm_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/io.h"

namespace edt::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr size_t kMaxMessage = 256 * 1024;  // as the server's

Status send_message(int fd, const json& message, const int* fds, size_t fd_count) {
  const std::string bytes = message.dump();
  if (bytes.size() > kMaxMessage) return invalid_argument("the request is larger than the warm server takes");
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  if (fd_count > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(fd_count * sizeof(int));
    cmsghdr* header = CMSG_FIRSTHDR(&msg);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(fd_count * sizeof(int));
    std::memcpy(CMSG_DATA(header), fds, fd_count * sizeof(int));
  }
  ssize_t n;
  do {
    n = sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return io_error("send to the warm interpreter", errno);
  return Status::ok();
}

// One message, or kUnavailable when the relay closed the connection.
Result<json> receive_message(int fd, Clock::time_point deadline) {
  if (!io::wait_ready(fd, POLLIN, deadline)) return Status(StatusCode::kTimeout, "the warm interpreter did not answer");
  std::string buffer(kMaxMessage, '\0');
  ssize_t n;
  do {
    n = recv(fd, buffer.data(), buffer.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return io_error("read from the warm interpreter", errno);
  if (n == 0) return Status(StatusCode::kUnavailable, "the warm interpreter closed the connection");
  json message = json::parse(buffer.substr(0, static_cast<size_t>(n)), nullptr, false);
  if (!message.is_object()) return internal_error("the warm interpreter sent something that is not a JSON object");
  return message;
}

Result<int> connect_to(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) return invalid_argument("the warm socket path is too long: " + path);
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return io_error("socket", errno);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    int e = errno;
    close(fd);
    return io_error("connect to " + path, e);
  }
  return fd;
}

// Reads what is there on `fd`; true at its end.
bool at_end(int fd) {
  char buffer[4096];
  ssize_t n;
  do {
    n = read(fd, buffer, sizeof buffer);
  } while (n < 0 && errno == EINTR);
  return n == 0 || (n < 0 && errno != EAGAIN);
}

}  // namespace

bool is_python_command(const std::vector<std::string>& argv) {
  if (argv.empty()) return false;
  const std::string& program = argv.front();
  const std::string name = program.substr(program.rfind('/') == std::string::npos ? 0 : program.rfind('/') + 1);
  static const std::regex kPython("python(3(\\.[0-9]+)?)?");
  return std::regex_match(name, kPython);
}

std::string warm_socket_path(const Environment& env) {
  if (auto off = env.find("EDT_WARM_START"); off != env.end()) {
    if (off->second == "0" || off->second == "off" || off->second == "no" || off->second == "false") return "";
  }
  auto path = env.find("EDT_WARM_SOCKET");
  return path != env.end() && !path->second.empty() ? path->second : kWarmSocketInContainer;
}

std::optional<std::string> warm_run_program() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return std::nullopt;
  std::string path(self, static_cast<size_t>(n));
  path = path.substr(0, path.rfind('/') + 1) + "edt-warm-run";
  if (access(path.c_str(), X_OK) != 0) return std::nullopt;
  return path;
}

// EDT_WARM_WORKER=JSON for `edt-warm-run --on HOST`; nothing if JSON cannot
// carry the environment (bytes that are not UTF-8) or it is too long for
// one variable: ssh then takes the worker as it is.
std::optional<std::string> warm_worker_variable(const std::vector<std::string>& command, const Environment& env,
                                                const std::string& cwd) {
  constexpr size_t kMaxVariable = 120 * 1024;  // the kernel takes 128 KiB per string
  try {
    std::string value = nlohmann::json{{"argv", command}, {"env", env_entries(env)}, {"cwd", cwd}}.dump();
    if (value.size() > kMaxVariable) return std::nullopt;
    return "EDT_WARM_WORKER=" + value;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

Result<WarmSession> warm_start(const std::string& socket_path, const WarmRequest& request,
                               std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  EDT_ASSIGN_OR_RETURN(int fd, connect_to(socket_path));
  json message{{"argv", request.argv}, {"env", request.env}};
  int stdio[3] = {0, 1, 2};
  if (!request.host.empty()) {
    message.update({{"host", request.host}, {"cwd", request.cwd}, {"marker", request.marker}});
    stdio[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  Status sent = stdio[0] < 0 ? io_error("open /dev/null", errno) : send_message(fd, message, stdio, 3);
  if (stdio[0] > 2) close(stdio[0]);
  Result<json> answer = sent.is_ok() ? receive_message(fd, deadline) : Result<json>(sent);
  // The worker's pid as this process's PID namespace sees it, or null (a
  // worker in another container): the server never says a host pid.
  if (answer.is_ok() && answer->contains("started") &&
      ((*answer)["started"].is_number_integer() || (*answer)["started"].is_null()))
    return WarmSession{fd, (*answer)["started"].is_null() ? 0 : (*answer)["started"].get<int>()};
  close(fd);
  if (!answer.is_ok()) return answer.status();
  if (answer->contains("cold") && (*answer)["cold"].is_string())
    return failed_precondition("the warm interpreter declined: " + (*answer)["cold"].get<std::string>());
  return internal_error("the warm interpreter answered " + answer->dump());
}

Result<WorkerEnd> relay_until_exit(const WarmSession& session, int signal_fd, int eof_fd) {
  while (true) {
    pollfd fds[3] = {{session.fd, POLLIN, 0}, {signal_fd, POLLIN, 0}, {eof_fd, POLLIN, 0}};
    if (poll(fds, eof_fd >= 0 ? 3 : 2, -1) < 0) {
      if (errno == EINTR) continue;
      return io_error("poll", errno);
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      while (read(signal_fd, &info, sizeof info) == sizeof info)
        EDT_RETURN_IF_ERROR(send_message(session.fd, json{{"signal", info.ssi_signo}}, nullptr, 0));
    }
    if (eof_fd >= 0 && fds[2].revents != 0 && at_end(eof_fd)) {
      eof_fd = -1;
      EDT_RETURN_IF_ERROR(send_message(session.fd, json{{"signal", SIGTERM}}, nullptr, 0));
    }
    if (fds[0].revents == 0) continue;
    Result<json> end = receive_message(session.fd, Clock::now());
    if (!end.is_ok()) return end.status().with_context("the warm interpreter's relay ended without the worker's status");
    if (end->contains("exit") && (*end)["exit"].is_number_integer()) return WorkerEnd{(*end)["exit"].get<int>(), 0};
    if (end->contains("killed") && (*end)["killed"].is_number_integer())
      return WorkerEnd{0, (*end)["killed"].get<int>()};
    return internal_error("the warm interpreter's relay sent " + end->dump());
  }
}

}  // namespace edt::launcher
