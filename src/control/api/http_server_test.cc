// HttpServer's bounds, deadlines and refusals, over raw sockets on loopback.
#include "control/api/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

namespace edt::control {
namespace {

using namespace std::chrono_literals;

// A connection from `source` (a loopback address) to 127.0.0.1:port.
int connect_from(int port, const char* source = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  return fd;
}

void send_text(int fd, const std::string& text) {
  ASSERT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

// What arrives until `until` is in it, the peer closes, or 10 s pass.
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

// Whether the peer closes `fd` within `limit`.
bool closed_within(int fd, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buffer[4096];
    if (::recv(fd, buffer, sizeof(buffer), 0) <= 0) return true;
  }
  return false;
}

const std::string kGet = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n";

class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpServerOptions options) {
    server_ = std::make_unique<HttpServer>(options, [this](Request& r) { return handle(r); });
    ASSERT_TRUE(server_->start("127.0.0.1", 0).is_ok());
  }

  Reply handle(Request& r) {
    if (r.path == "/stream") {
      Reply reply;
      reply.stream = [this](StreamWriter& out) {
        out.write("first");
        while (out.open() && !release_.load()) std::this_thread::sleep_for(10ms);
      };
      return reply;
    }
    if (r.path == "/throw") throw std::runtime_error("boom");
    return json_reply(200, {{"path", r.path}, {"body", r.body}, {"q", r.get_param_value("q")}});
  }

  int port() const { return server_->port(); }

  std::atomic<bool> release_{false};
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, KeepAliveServesRequestsOnOneConnection) {
  start({});
  const int fd = connect_from(port());
  for (int i = 0; i < 3; ++i) {
    send_text(fd, "GET /a%20b?q=x+y%21 HTTP/1.1\r\nHost: h\r\n\r\n");
    const std::string got = receive(fd, "}");
    EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
    EXPECT_NE(got.find(R"("path":"/a b")"), std::string::npos) << got;
    EXPECT_NE(got.find(R"("q":"x y!")"), std::string::npos) << got;
  }
  // A HEAD: the GET's headers, no body; the connection goes on.
  send_text(fd, "HEAD /h HTTP/1.1\r\nHost: h\r\n\r\n" + kGet);
  const std::string got = receive(fd, R"("q":""})");
  EXPECT_NE(got.find("Content-Length: 30\r\n\r\nHTTP/1.1 200"), std::string::npos) << got;
  EXPECT_EQ(got.find(R"("path":"/h")"), std::string::npos) << got;
  EXPECT_NE(got.find(R"("path":"/x")"), std::string::npos) << got;
  ::close(fd);
}

TEST_F(HttpServerTest, ReadsABodyAfterExpectContinue) {
  start({});
  const int fd = connect_from(port());
  send_text(fd, "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_NE(receive(fd, "\r\n\r\n").find("100 Continue"), std::string::npos);
  send_text(fd, "{}");
  EXPECT_NE(receive(fd, R"("q":""})").find(R"("body":"{}")"), std::string::npos);
  ::close(fd);
}

TEST_F(HttpServerTest, RefusesBeforeTheHandlerRuns) {
  HttpServerOptions options;
  options.max_body_bytes = 10;
  start(options);
  struct Case {
    std::string request;
    std::string status;
  } cases[] = {
      {"POST /p HTTP/1.1\r\nHost: h\r\n\r\n", "411"},
      {"POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "411"},
      {"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n", "413"},
      {"GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n", "414"},
      {"GET /x HTTP/1.1\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n", "431"},
      {"BREW /x HTTP/1.1\r\nHost: h\r\n\r\n", "400"},
      {"GET /throw HTTP/1.1\r\nHost: h\r\n\r\n", "500"},
  };
  for (const auto& c : cases) {
    const int fd = connect_from(port());
    send_text(fd, c.request);
    const std::string got = receive(fd, "}}");
    EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 " + c.status) << c.request.substr(0, 60) << "\n" << got;
    EXPECT_NE(got.find(R"("fix":)"), std::string::npos) << got;
    ::close(fd);
  }
}

TEST_F(HttpServerTest, ARequestsOwnBodyLimitAndABoundOnLargeBodiesAtOnce) {
  HttpServerOptions options;
  options.max_body_bytes = 10;
  options.body_limit = [](const Request& head) { return head.path == "/big" ? size_t{100} : size_t{10}; };
  options.max_large_bodies = 1;
  start(options);
  auto put = [](const std::string& path, size_t length, const std::string& extra = "") {
    return "PUT " + path + " HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(length) + "\r\n" + extra + "\r\n";
  };
  auto answer = [this](const std::string& request) {
    const int fd = connect_from(port());
    send_text(fd, request);
    std::string got = receive(fd, "}");
    ::close(fd);
    return got.substr(0, 12);
  };
  EXPECT_EQ(answer(put("/big", 101)), "HTTP/1.1 413");
  EXPECT_EQ(answer(put("/small", 11)), "HTTP/1.1 413");
  // One large body is being read (its 100 Continue says the slot is taken): another waits its turn, 503.
  const int first = connect_from(port());
  send_text(first, put("/big", 50, "Expect: 100-continue\r\n"));
  EXPECT_NE(receive(first, "\r\n\r\n").find("100 Continue"), std::string::npos);
  const int second = connect_from(port());
  send_text(second, put("/big", 50) + std::string(50, 'b'));
  const std::string refused = receive(second, "}}");
  EXPECT_EQ(refused.substr(0, 12), "HTTP/1.1 503") << refused;
  EXPECT_NE(refused.find("large bodies"), std::string::npos) << refused;
  ::close(second);
  EXPECT_EQ(answer(put("/big", 5) + "small"), "HTTP/1.1 200");  // a small body needs no slot
  send_text(first, std::string(50, 'a'));
  EXPECT_NE(receive(first, "}").find(std::string(50, 'a')), std::string::npos);
  ::close(first);
  // The slot came back with the first one's answer.
  EXPECT_EQ(answer(put("/big", 50) + std::string(50, 'c')), "HTTP/1.1 200");
}

TEST(ClientLimits, EachUserAndEachAddressWithoutATokenHasBoundsOfItsOwn) {
  HttpServerOptions options;
  options.max_connections = 5;
  options.max_connections_per_user = 2;
  options.max_connections_per_address = 1;
  options.max_streams_per_user = 1;
  using Kind = ClientLimits::Kind;
  ClientLimits limits(options);
  const Client nat{"", "10.0.0.1"}, alice{"alice", "10.0.0.1"}, bob{"bob", "10.0.0.1"};
  // A connection counts against its address until it shows a token, then against its user.
  ASSERT_TRUE(limits.take(Kind::kConnection, nat).is_ok());
  Status refused = limits.take(Kind::kConnection, nat);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("10.0.0.1 without a valid token"), std::string::npos) << refused.message();
  EXPECT_NE(refused.fix().find("Authorization: Bearer"), std::string::npos) << refused.fix();
  ASSERT_TRUE(limits.move_connection(nat, alice).is_ok());
  EXPECT_EQ(limits.held(Kind::kConnection, nat), 0u);
  ASSERT_TRUE(limits.take(Kind::kConnection, nat).is_ok());
  ASSERT_TRUE(limits.move_connection(nat, alice).is_ok());
  EXPECT_EQ(limits.held(Kind::kConnection, alice), 2u);
  // Alice is full: her third connection is refused, naming her; bob's is not.
  ASSERT_TRUE(limits.take(Kind::kConnection, nat).is_ok());
  refused = limits.move_connection(nat, alice);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("of the user alice"), std::string::npos) << refused.message();
  // The refused connection is alice's until closed, not her address's.
  EXPECT_EQ(limits.held(Kind::kConnection, nat), 0u);
  EXPECT_EQ(limits.held(Kind::kConnection, alice), 3u);
  limits.give_back(Kind::kConnection, alice);
  ASSERT_TRUE(limits.take(Kind::kConnection, nat).is_ok());
  ASSERT_TRUE(limits.move_connection(nat, bob).is_ok());
  // A kept-alive connection showing another user's token moves to them.
  ASSERT_TRUE(limits.move_connection(bob, Client{"carol", "10.0.0.1"}).is_ok());
  EXPECT_EQ(limits.held(Kind::kConnection, bob), 0u);
  EXPECT_EQ(limits.held(Kind::kConnection), 3u);
  // The bound in all still stands.
  ASSERT_TRUE(limits.take(Kind::kConnection, Client{"", "10.0.0.3"}).is_ok());
  ASSERT_TRUE(limits.take(Kind::kConnection, Client{"", "10.0.0.4"}).is_ok());
  refused = limits.take(Kind::kConnection, Client{"", "10.0.0.5"});
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("edtd has 5 connections open"), std::string::npos) << refused.message();
  // Streams: per user as well.
  ASSERT_TRUE(limits.take(Kind::kStream, alice).is_ok());
  refused = limits.take(Kind::kStream, alice);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("streams open of the user alice"), std::string::npos) << refused.message();
  EXPECT_TRUE(limits.take(Kind::kStream, bob).is_ok());
  limits.give_back(Kind::kStream, alice);
  EXPECT_TRUE(limits.take(Kind::kStream, alice).is_ok());
}

TEST_F(HttpServerTest, BoundsConnectionsPerAddressAndAnswersOthers) {
  HttpServerOptions options;
  options.max_connections_per_address = 3;
  start(options);
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(connect_from(port(), "127.0.0.2"));
  const int over = connect_from(port(), "127.0.0.2");
  const std::string refused = receive(over, "}}");
  EXPECT_EQ(refused.substr(0, 12), "HTTP/1.1 503") << refused;
  EXPECT_NE(refused.find("127.0.0.2"), std::string::npos) << refused;
  const int other = connect_from(port(), "127.0.0.1");
  send_text(other, kGet);
  EXPECT_EQ(receive(other, "}").substr(0, 12), "HTTP/1.1 200");
  for (int fd : held) ::close(fd);
  ::close(over);
  ::close(other);
}

// Users behind one address: each has bounds of their own, and one over
// hers is refused while the other is served.
TEST_F(HttpServerTest, OneUserCannotPushAnotherIntoA503) {
  HttpServerOptions options;
  options.max_connections_per_address = 2;
  options.max_connections_per_user = 6;
  options.max_streams_per_user = 2;
  options.identify = [](const Request& head) -> std::optional<std::string> {
    if (!head.has_header("X-User")) return std::nullopt;
    return head.get_header_value("X-User");
  };
  start(options);
  auto as = [](const std::string& user, const std::string& path = "/x") {
    return "GET " + path + " HTTP/1.1\r\nHost: h\r\nX-User: " + user + "\r\n\r\n";
  };
  // Alice: 4 kept-alive connections and 2 streams, more than the address's 2.
  std::vector<int> alices;
  for (int i = 0; i < 4; ++i) {
    alices.push_back(connect_from(port(), "127.0.0.2"));
    send_text(alices.back(), as("alice"));
    ASSERT_EQ(receive(alices.back(), "}").substr(0, 12), "HTTP/1.1 200") << i;
  }
  for (int i = 0; i < 2; ++i) {
    alices.push_back(connect_from(port(), "127.0.0.2"));
    send_text(alices.back(), as("alice", "/stream"));
    ASSERT_NE(receive(alices.back(), "first").find("first"), std::string::npos) << i;
  }
  // More of hers: up to her 6 (a stream's connection counts until the
  // stream has it), then 503 naming her.
  std::string refused;
  int fifth = -1;
  while (refused.empty() && alices.size() < 12) {
    fifth = connect_from(port(), "127.0.0.2");
    send_text(fifth, as("alice"));
    const std::string got = receive(fifth, "}");
    if (got.starts_with("HTTP/1.1 200")) alices.push_back(fifth);
    else refused = got + receive(fifth, "}}");
  }
  EXPECT_LE(alices.size(), 8u);  // 6 kept alive, 2 streaming
  EXPECT_EQ(refused.substr(0, 12), "HTTP/1.1 503") << refused;
  EXPECT_NE(refused.find("connections of the user alice"), std::string::npos) << refused;
  send_text(alices[0], as("alice", "/stream"));  // on a connection she holds
  refused = receive(alices[0], "}}");
  EXPECT_EQ(refused.substr(0, 12), "HTTP/1.1 503") << refused;
  EXPECT_NE(refused.find("streams open of the user alice"), std::string::npos) << refused;
  // Bob, from the same address: his requests and his stream are served.
  const int bobs = connect_from(port(), "127.0.0.2");
  for (int i = 0; i < 3; ++i) {
    send_text(bobs, as("bob"));
    EXPECT_EQ(receive(bobs, "}").substr(0, 12), "HTTP/1.1 200") << i;
  }
  const int bobs_stream = connect_from(port(), "127.0.0.2");
  send_text(bobs_stream, as("bob", "/stream"));
  EXPECT_NE(receive(bobs_stream, "first").find("first"), std::string::npos);
  // Connections without a token: 2 from an address, the third 503.
  const int anonymous[] = {connect_from(port(), "127.0.0.3"), connect_from(port(), "127.0.0.3")};
  const int over = connect_from(port(), "127.0.0.3");
  refused = receive(over, "}}");
  EXPECT_EQ(refused.substr(0, 12), "HTTP/1.1 503") << refused;
  EXPECT_NE(refused.find("127.0.0.3 without a valid token"), std::string::npos) << refused;
  release_ = true;
  for (int fd : alices) ::close(fd);
  for (int fd : {fifth, bobs, bobs_stream, anonymous[0], anonymous[1], over}) ::close(fd);
}

TEST_F(HttpServerTest, ClosesASlowHeaderAndAnIdleConnection) {
  HttpServerOptions options;
  options.header_timeout = 300ms;
  options.idle_timeout = 300ms;
  start(options);
  const int slow = connect_from(port());
  send_text(slow, "GET /x HTTP/1.1\r\n");
  const int idle = connect_from(port());
  // A line now and then does not keep the request open past header_timeout.
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(50ms);
    send_text(slow, "X-Slow: 1\r\n");
  }
  EXPECT_TRUE(closed_within(slow, 5s));
  EXPECT_TRUE(closed_within(idle, 5s));
  ::close(slow);
  ::close(idle);
}

TEST_F(HttpServerTest, StreamsRunOffTheWorkersAndAreBounded) {
  HttpServerOptions options;
  options.max_streams = 2;
  options.workers = 1;
  start(options);
  std::vector<int> streams;
  for (int i = 0; i < 2; ++i) {
    streams.push_back(connect_from(port()));
    send_text(streams.back(), "GET /stream HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_NE(receive(streams.back(), "first").find("first"), std::string::npos);
  }
  const int third = connect_from(port());
  send_text(third, "GET /stream HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(receive(third, "}}").substr(0, 12), "HTTP/1.1 503");
  // The one worker is free: plain requests are answered while streams run.
  const int plain = connect_from(port());
  send_text(plain, kGet);
  EXPECT_EQ(receive(plain, "}").substr(0, 12), "HTTP/1.1 200");
  release_ = true;
  for (int fd : streams) {
    EXPECT_NE(receive(fd, "0\r\n\r\n").find("0\r\n\r\n"), std::string::npos);
    ::close(fd);
  }
  ::close(third);
  ::close(plain);
}

TEST_F(HttpServerTest, StopEndsOpenStreams) {
  start({});
  const int fd = connect_from(port());
  send_text(fd, "GET /stream HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_NE(receive(fd, "first").find("first"), std::string::npos);
  server_->stop();
  EXPECT_TRUE(closed_within(fd, 5s));
  ::close(fd);
}

}  // namespace
}  // namespace edt::control
