// The terminal's ssh checks the host key against the session's known_hosts:
// a real sshd on loopback with a host certificate from the session's CA is
// reached, one with a self-made key is refused. Needs root (sshd) and runs
// under the integration lock.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/net.h"
#include "control/console/terminal_server.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int run(const std::string& command) { return std::system(command.c_str()); }

class TerminalSshTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "sshd needs root";
    dir_ = fs::temp_directory_path() / ("edt-terminal-ssh-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    const std::string d = dir_.string();
    for (const char* key : {"ca", "certified", "self_made", "client"})
      ASSERT_EQ(run("ssh-keygen -q -t ed25519 -N '' -f " + d + "/" + key), 0);
    // For the container's name, as edtd signs it: the terminal checks the
    // name (HostKeyAlias), whatever address it reaches the container at.
    ASSERT_EQ(run("ssh-keygen -q -s " + d + "/ca -I c -h -n c " + d + "/certified.pub"), 0);
    fs::copy_file(dir_ / "client.pub", dir_ / "authorized_keys");
    server_ = std::make_unique<TerminalServer>(d);
    ASSERT_TRUE(server_->start("127.0.0.1", 0).is_ok());
  }
  void TearDown() override {
    server_.reset();
    for (const char* name : {"certified", "self_made"}) stop_sshd(dir_ / (std::string(name) + ".pid"));
    fs::remove_all(dir_);
  }

  // Stops the sshd whose pid file is `pid_file` and waits (at most 5 s) until
  // it has removed that file, so the directory can be removed after it.
  static void stop_sshd(const fs::path& pid_file) {
    if (!fs::exists(pid_file)) return;
    run("kill $(cat " + pid_file.string() + ")");
    for (int i = 0; i < 250 && fs::exists(pid_file); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  // Starts sshd on 127.0.0.1 with host key `name` (and its certificate, if
  // any); a login runs `echo terminal-ok`. Returns its port once it listens.
  int start_sshd(const std::string& name) {
    const int port = edt::net::free_port("127.0.0.1").value();
    const std::string key = (dir_ / name).string();
    run("/usr/sbin/sshd -f /dev/null -o ListenAddress=127.0.0.1:" + std::to_string(port) + " -o HostKey=" + key +
        (fs::exists(key + "-cert.pub") ? " -o HostCertificate=" + key + "-cert.pub" : "") +
        " -o AuthorizedKeysFile=" + (dir_ / "authorized_keys").string() +
        " -o StrictModes=no -o UsePAM=no -o 'ForceCommand=echo terminal-ok' -o PidFile=" + key + ".pid -E " + key +
        ".log");
    for (int i = 0; i < 200 && read_text(key + ".log").find("Server listening") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_NE(read_text(key + ".log").find("Server listening"), std::string::npos) << read_text(key + ".log");
    return port;
  }

  // Opens a terminal to 127.0.0.1:port and returns every byte the terminal
  // server sent until it closed (at most 20 s).
  std::string terminal(int port) {
    const std::string id = server_->open_session(
        {"c", "127.0.0.1", port, "root", read_text(dir_ / "client"), "@cert-authority * " + read_text(dir_ / "ca.pub")}, {});
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const std::string request = "GET /terminal/" + id + " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string answer;
    char buffer[4096];
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 500) <= 0) continue;
      ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      answer.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
    return answer;
  }

  fs::path dir_;
  std::unique_ptr<TerminalServer> server_;
};

TEST_F(TerminalSshTest, ReachesACertifiedHostAndRefusesAnother) {
  const std::string certified = terminal(start_sshd("certified"));
  EXPECT_NE(certified.find("terminal-ok"), std::string::npos) << certified;
  const std::string impostor = terminal(start_sshd("self_made"));
  EXPECT_NE(impostor.find("Host key verification failed"), std::string::npos) << impostor;
  EXPECT_EQ(impostor.find("terminal-ok"), std::string::npos) << impostor;
  // The session's key files lasted only as long as the session.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const std::string name = entry.path().filename();
    EXPECT_TRUE(name.find(".known_hosts") == std::string::npos && name.find(".key") == std::string::npos) << name;
  }
}

}  // namespace
}  // namespace edt::control
