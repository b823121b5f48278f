// JupyterProxy behind a real HttpServer, in front of a stand-in notebook
// server on loopback that records what reaches it: who is let through,
// what is taken off and put on the way, the login link and its cookie, and
// a WebSocket's bytes both ways.
#include "control/console/jupyter_proxy.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "common/net.h"
#include "control/api/http_server.h"

namespace edt::control {
namespace {

using namespace std::chrono_literals;

const std::string kServerToken = "server-secret";

// What arrives on `fd` until `until` is in it, the peer closes, or 10 s pass.
std::string receive(int fd, const std::string& until) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (got.find(until) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

void send_text(int fd, const std::string& text) {
  ASSERT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

// The stand-in notebook server: records each request head; answers a
// WebSocket upgrade with 101 and then echoes, anything else with "hello".
class FakeNotebook {
 public:
  FakeNotebook() {
    listen_fd_ = net::listen_tcp("127.0.0.1", 0).value();
    port_ = net::local_port(listen_fd_).value();
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeNotebook() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  std::string last_head() {
    std::lock_guard<std::mutex> lock(mu_);
    return heads_.empty() ? "" : heads_.back();
  }
  size_t requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return heads_.size();
  }

 private:
  void serve() {
    for (;;) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      const std::string head = receive(fd, "\r\n\r\n");
      {
        std::lock_guard<std::mutex> lock(mu_);
        heads_.push_back(head);
      }
      if (head.find("Upgrade: websocket") != std::string::npos) {
        send_text(fd, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
        const std::string bytes = receive(fd, "ping");
        send_text(fd, "echo:" + bytes);
      } else {
        send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
      }
      ::close(fd);
    }
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> heads_;
};

class JupyterProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    JupyterProxyOptions options;
    options.authenticate = [](const std::string& token) -> std::optional<User> {
      if (token == "alice-token") return User{"alice", false};
      if (token == "bob-token") return User{"bob", false};
      return std::nullopt;
    };
    options.endpoint = [this](const User& user, const std::string& cluster) -> Result<JupyterEndpoint> {
      if (user.name != "alice" || cluster != "tthvd") return missing("name", "no such cluster", "");
      return JupyterEndpoint{"127.0.0.1", notebook_.port(), kServerToken, JupyterServers::base_url(cluster)};
    };
    proxy_ = std::make_unique<JupyterProxy>(options);
    server_ = std::make_unique<HttpServer>(HttpServerOptions{}, [this](Request& r) { return proxy_->handle(r); });
    ASSERT_TRUE(server_->start("127.0.0.1", 0).is_ok());
  }

  // Sends `request` on a new connection; returns all that comes back.
  std::string exchange(const std::string& request, const std::string& until = "\r\n\r\n") {
    auto fd = net::connect_tcp("127.0.0.1", static_cast<uint16_t>(server_->port()),
                               std::chrono::steady_clock::now() + 5s);
    EXPECT_TRUE(fd.is_ok());
    send_text(*fd, request);
    std::string reply = receive(*fd, until);
    ::close(*fd);
    return reply;
  }

  // A login code, as POST /api/v1/clusters/tthvd/jupyter gives alice.
  std::string login_code() {
    Request req;
    req.path = "/api/v1/clusters/tthvd/jupyter";
    req.headers.emplace("Authorization", "Bearer alice-token");
    std::regex_match(req.path, req.matches, std::regex("/api/v1/clusters/([^/]+)/jupyter"));
    auto answer = proxy_->open(req, User{"alice", false});
    EXPECT_TRUE(answer.is_ok());
    const std::string url = nlohmann::json::parse(answer->body)["url"];
    EXPECT_TRUE(url.starts_with("/c/tthvd/jupyter/?edt_login="));
    return url.substr(url.find('=') + 1);
  }

  FakeNotebook notebook_;
  std::unique_ptr<JupyterProxy> proxy_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(JupyterProxyTest, NoCredentialsIs401AsJsonOrAPage) {
  EXPECT_TRUE(exchange("GET /c/tthvd/jupyter/tree HTTP/1.1\r\nHost: h\r\n\r\n", "}}").starts_with("HTTP/1.1 401"));
  const std::string page =
      exchange("GET /c/tthvd/jupyter/tree HTTP/1.1\r\nHost: h\r\nAccept: text/html\r\n\r\n", "</html>");
  EXPECT_TRUE(page.starts_with("HTTP/1.1 401"));
  EXPECT_NE(page.find("edt jupyter tthvd"), std::string::npos);
  EXPECT_EQ(notebook_.requests(), 0u);
}

TEST_F(JupyterProxyTest, AnotherUsersTokenIs403) {
  const std::string reply =
      exchange("GET /c/tthvd/jupyter/tree HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer bob-token\r\n\r\n", "}}");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 403")) << reply;
  EXPECT_TRUE(exchange("GET /c/tthvd/jupyter/ HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer nobody\r\n\r\n", "}}")
                  .starts_with("HTTP/1.1 401"));
  EXPECT_EQ(notebook_.requests(), 0u);
}

TEST_F(JupyterProxyTest, OwnersRequestReachesTheServerWithItsTokenInsteadOfTheirs) {
  const std::string reply = exchange(
      "GET /c/tthvd/jupyter/api/contents?x=1 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer alice-token\r\n"
      "Cookie: theirs=1\r\n\r\n",
      "hello");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200")) << reply;
  EXPECT_NE(reply.find("hello"), std::string::npos);
  const std::string head = notebook_.last_head();
  EXPECT_TRUE(head.starts_with("GET /c/tthvd/jupyter/api/contents?x=1 HTTP/1.1\r\n")) << head;
  EXPECT_NE(head.find("Authorization: token " + kServerToken + "\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("alice-token"), std::string::npos) << head;
  EXPECT_NE(head.find("Connection: close\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Cookie: theirs=1\r\n"), std::string::npos) << head;
}

TEST_F(JupyterProxyTest, LoginLinkWorksOnceAndItsCookieLetsThrough) {
  const std::string code = login_code();
  const std::string login = exchange("GET /c/tthvd/jupyter/?edt_login=" + code + " HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_TRUE(login.starts_with("HTTP/1.1 303")) << login;
  EXPECT_NE(login.find("Location: /c/tthvd/jupyter/\r\n"), std::string::npos) << login;
  const size_t at = login.find(std::string(JupyterProxy::kCookie) + "=");
  ASSERT_NE(at, std::string::npos) << login;
  const std::string cookie = login.substr(at, login.find(';', at) - at);
  EXPECT_NE(login.find("Path=/c/tthvd/jupyter/; HttpOnly; SameSite=Lax"), std::string::npos) << login;
  // Spent: the same link again is refused.
  EXPECT_TRUE(exchange("GET /c/tthvd/jupyter/?edt_login=" + code + " HTTP/1.1\r\nHost: h\r\n\r\n", "}}")
                  .starts_with("HTTP/1.1 401"));
  const std::string reply =
      exchange("GET /c/tthvd/jupyter/tree HTTP/1.1\r\nHost: h\r\nCookie: a=b; " + cookie + "\r\n\r\n", "hello");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200")) << reply;
  const std::string head = notebook_.last_head();
  EXPECT_NE(head.find("Cookie: a=b\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find(JupyterProxy::kCookie), std::string::npos) << head;
  // The cookie is for tthvd only.
  EXPECT_TRUE(exchange("GET /c/other/jupyter/tree HTTP/1.1\r\nHost: h\r\nCookie: " + cookie + "\r\n\r\n", "}}")
                  .starts_with("HTTP/1.1 401"));
}

// JupyterLab's many requests and WebSockets count against the user the
// session cookie stands for (ApiServerOptions::session_token), not against
// the small bounds of an address without a token.
TEST_F(JupyterProxyTest, ASessionCookieNamesItsUsersToken) {
  const std::string login = exchange("GET /c/tthvd/jupyter/?edt_login=" + login_code() + " HTTP/1.1\r\nHost: h\r\n\r\n");
  const size_t at = login.find(std::string(JupyterProxy::kCookie) + "=");
  ASSERT_NE(at, std::string::npos) << login;
  Request with_cookie;
  with_cookie.headers.emplace("Cookie", "a=b; " + login.substr(at, login.find(';', at) - at));
  EXPECT_EQ(proxy_->session_token(with_cookie), std::optional<std::string>("alice-token"));
  Request without;
  without.headers.emplace("Cookie", std::string(JupyterProxy::kCookie) + "=not-a-session");
  EXPECT_EQ(proxy_->session_token(without), std::nullopt);
  EXPECT_EQ(proxy_->session_token(Request{}), std::nullopt);
}

TEST_F(JupyterProxyTest, AnotherSitesPageIsRefused) {
  const std::string reply = exchange(
      "POST /c/tthvd/jupyter/api/kernels HTTP/1.1\r\nHost: h:1\r\nOrigin: http://evil.example\r\n"
      "Authorization: Bearer alice-token\r\nContent-Length: 0\r\n\r\n",
      "}}");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 403")) << reply;
  EXPECT_EQ(notebook_.requests(), 0u);
  EXPECT_TRUE(exchange("POST /c/tthvd/jupyter/api/kernels HTTP/1.1\r\nHost: h:1\r\nOrigin: http://h:1\r\n"
                       "Authorization: Bearer alice-token\r\nContent-Length: 0\r\n\r\n",
                       "hello")
                  .starts_with("HTTP/1.1 200"));
}

TEST_F(JupyterProxyTest, WebSocketBytesPassBothWays) {
  auto fd = net::connect_tcp("127.0.0.1", static_cast<uint16_t>(server_->port()), std::chrono::steady_clock::now() + 5s);
  ASSERT_TRUE(fd.is_ok());
  send_text(*fd, "GET /c/tthvd/jupyter/api/kernels/k/channels HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                 "Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: abc\r\nAuthorization: Bearer alice-token\r\n\r\n");
  EXPECT_TRUE(receive(*fd, "\r\n\r\n").starts_with("HTTP/1.1 101"));
  send_text(*fd, "ping");
  EXPECT_EQ(receive(*fd, "echo:ping"), "echo:ping");
  ::close(*fd);
  const std::string head = notebook_.last_head();
  EXPECT_NE(head.find("Connection: Upgrade\r\nUpgrade: websocket\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Sec-WebSocket-Key: abc\r\n"), std::string::npos) << head;
}

TEST_F(JupyterProxyTest, OtherPathsUnderCAreNotFound) {
  EXPECT_TRUE(exchange("GET /c/tthvd/other HTTP/1.1\r\nHost: h\r\n\r\n", "}}").starts_with("HTTP/1.1 404"));
}

}  // namespace
}  // namespace edt::control
