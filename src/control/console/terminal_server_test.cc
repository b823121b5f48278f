// The terminal's WebSocket handshake against real sockets: a session takes
// only the origins it was opened for, once.
#include "control/console/terminal_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

namespace edt::control {
namespace {

class TerminalServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("edt-terminal-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    server_ = std::make_unique<TerminalServer>(dir_.string());
    ASSERT_TRUE(server_->start("127.0.0.1", 0).is_ok());
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string open() {
    // Port 1 on loopback: ssh, if it runs at all, is refused and ends.
    return server_->open_session({"c-launcher", "127.0.0.1", 1, "root", "not a key", "not a known_hosts"}, {"http://console.test:7470"});
  }
  // Sends an upgrade request for session `id` with `origin` (none if
  // empty); returns the status line of the answer.
  std::string handshake(const std::string& id, const std::string& origin) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    std::string request = "GET /terminal/" + id + " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                          "Sec-WebSocket-Version: 13\r\n";
    if (!origin.empty()) request += "Origin: " + origin + "\r\n";
    request += "\r\n";
    EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
    std::string answer;
    char buffer[4096];
    while (answer.find("\r\n") == std::string::npos) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) break;
      ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      answer.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
    return answer.substr(0, answer.find("\r\n"));
  }

  std::filesystem::path dir_;
  std::unique_ptr<TerminalServer> server_;
};

TEST_F(TerminalServerTest, ASessionTakesOnlyItsConsolesOrigin) {
  const std::string hijacked = open();
  EXPECT_EQ(handshake(hijacked, "http://evil.test"), "HTTP/1.1 403 Forbidden");
  // The refused attempt spent the session: the console must open another.
  EXPECT_EQ(handshake(hijacked, "http://console.test:7470"), "HTTP/1.1 403 Forbidden");
  EXPECT_EQ(handshake(open(), "http://console.test:7471"), "HTTP/1.1 403 Forbidden");
  EXPECT_EQ(handshake(open(), "http://console.test:7470"), "HTTP/1.1 101 Switching Protocols");
  EXPECT_EQ(handshake(open(), "HTTP://Console.TEST:7470"), "HTTP/1.1 101 Switching Protocols");
  // No Origin: not a browser page, so no page to hijack from.
  EXPECT_EQ(handshake(open(), ""), "HTTP/1.1 101 Switching Protocols");
}

}  // namespace
}  // namespace edt::control
