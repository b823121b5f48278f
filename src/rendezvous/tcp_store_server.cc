// The TCP store server: one thread, one poll loop, every client on its own.
//
// Each connection has an input buffer, an output buffer and at most one
// parked request: a get or wait whose keys are not all set yet. The loop
// answers a request as soon as its frame is complete; a parked request is
// re-checked whenever any key changes (a request from any client, or a call on
// local_store(), which pokes the loop through an eventfd) and answered with
// kTimeout when its deadline passes. A parked client's later frames stay in
// its buffer, so its requests are still answered in order, and nobody else
// waits for it.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <optional>
#include <thread>

#include "common/net.h"
#include "edt/tcp_store.h"
#include "rendezvous/tcp_store_protocol.h"

namespace edt {
namespace {

using net::Clock;
using rendezvous::Op;

// local_store(): the server's data, with every change poking the loop so
// parked remote waits see it.
class NotifyingStore final : public Store {
 public:
  NotifyingStore(std::shared_ptr<MemoryStore> data, int wake_fd) : data_(std::move(data)), wake_fd_(wake_fd) {}

  Status set(const std::string& key, const std::string& value) override { return poke(data_->set(key, value)); }
  Result<std::string> get(const std::string& key, Duration timeout) override { return data_->get(key, timeout); }
  Result<std::optional<std::string>> try_get(const std::string& key) override { return data_->try_get(key); }
  Result<int64_t> add(const std::string& key, int64_t delta) override { return poke(data_->add(key, delta)); }
  Result<std::string> compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) override {
    return poke(data_->compare_set(key, expected, desired));
  }
  Status wait(const std::vector<std::string>& keys, Duration timeout) override { return data_->wait(keys, timeout); }
  Result<bool> erase(const std::string& key) override { return data_->erase(key); }

 private:
  template <typename R>
  R poke(R r) {
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
    (void)ignored;
    return r;
  }
  std::shared_ptr<MemoryStore> data_;
  int wake_fd_;
};

struct Parked {
  Op op;
  std::vector<std::string> keys;
  Clock::time_point deadline;
  int64_t timeout_ms;
};

struct Client {
  int fd;
  std::string in;
  std::string out;
  std::optional<Parked> parked;
  bool closing = false;
};

std::string response(StatusCode code, std::string_view value, bool present = true) {
  return rendezvous::FrameWriter().u8(static_cast<uint8_t>(code)).u8(present ? 1 : 0).str(value).take();
}
std::string response(const Status& status) { return response(status.code(), status.message()); }

class TcpStoreServerImpl final : public TcpStoreServer {
 public:
  TcpStoreServerImpl(int listen_fd, int wake_fd, uint16_t port)
      : listen_fd_(listen_fd),
        wake_fd_(wake_fd),
        port_(port),
        data_(std::make_shared<MemoryStore>()),
        local_(std::make_shared<NotifyingStore>(data_, wake_fd)) {
    thread_ = std::thread([this] { loop(); });
  }

  ~TcpStoreServerImpl() override {
    stop_.store(true);
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
    (void)ignored;
    thread_.join();
    for (auto& c : clients_) ::close(c.fd);
    ::close(listen_fd_);
    ::close(wake_fd_);
  }

  uint16_t port() const override { return port_; }
  std::shared_ptr<Store> local_store() override { return local_; }

 private:
  void loop() {
    std::vector<pollfd> fds;
    while (!stop_.load()) {
      fds.clear();
      fds.push_back({listen_fd_, POLLIN, 0});
      fds.push_back({wake_fd_, POLLIN, 0});
      for (auto& c : clients_) {
        short events = c.closing ? 0 : POLLIN;
        if (!c.out.empty()) events |= POLLOUT;
        fds.push_back({c.fd, events, 0});
      }
      int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms());
      if (rc < 0 && errno != EINTR) break;
      if (fds[1].revents & POLLIN) {
        uint64_t count;
        ssize_t ignored = ::read(wake_fd_, &count, sizeof count);
        (void)ignored;
      }
      if (fds[0].revents & POLLIN) accept_clients();
      size_t i = 2;
      for (auto& c : clients_) {
        if (i >= fds.size()) break;  // accepted during this round
        short revents = fds[i++].revents;
        if (revents & (POLLIN | POLLHUP | POLLERR)) read_from(c);
        if (!c.closing) serve(c);
      }
      // Any change may unpark anyone, including a local_store() change.
      for (auto& c : clients_) unpark(c);
      for (auto& c : clients_)
        if (!c.out.empty()) write_to(c);
      clients_.remove_if([](const Client& c) {
        if (c.closing && c.out.empty()) {
          ::close(c.fd);
          return true;
        }
        return false;
      });
    }
  }

  int poll_timeout_ms() const {
    std::optional<Clock::time_point> earliest;
    for (const auto& c : clients_)
      if (c.parked && (!earliest || c.parked->deadline < *earliest)) earliest = c.parked->deadline;
    if (!earliest) return -1;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*earliest - Clock::now()).count() + 1;
    return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
  }

  void accept_clients() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) return;
      (void)net::set_nodelay(fd);
      clients_.push_back(Client{fd, {}, {}, std::nullopt});
    }
  }

  void read_from(Client& c) {
    char buf[64 * 1024];
    for (;;) {
      ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
      if (r > 0) {
        c.in.append(buf, static_cast<size_t>(r));
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      // EOF or error: the client is gone; nothing to answer.
      c.closing = true;
      c.out.clear();
      c.parked.reset();
      return;
    }
  }

  void write_to(Client& c) {
    while (!c.out.empty()) {
      ssize_t w = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (w > 0) {
        c.out.erase(0, static_cast<size_t>(w));
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.closing = true;
      c.out.clear();
      return;
    }
  }

  // Answers complete frames in order until one parks.
  void serve(Client& c) {
    while (!c.parked && c.in.size() >= 4) {
      uint32_t n;
      std::memcpy(&n, c.in.data(), 4);
      if (n > rendezvous::kMaxFrameBytes) {
        c.out += response(invalid_argument("TCP store request of " + std::to_string(n) + " bytes is too large"));
        c.closing = true;
        return;
      }
      if (c.in.size() < 4 + size_t{n}) return;
      const std::string body = c.in.substr(4, n);
      c.in.erase(0, 4 + size_t{n});
      handle(c, body);
    }
  }

  void handle(Client& c, std::string_view body) {
    auto request = rendezvous::decode_request(body);
    if (!request.is_ok()) return void(c.out += response(request.status()));
    rendezvous::Request& q = *request;
    const std::string& key = q.keys.front();
    switch (q.op) {
      case Op::kSet:
        c.out += response(data_->set(key, q.value));
        return;
      case Op::kTryGet: {
        auto v = data_->try_get(key);
        c.out += v.is_ok() ? response(StatusCode::kOk, v->value_or(""), v->has_value()) : response(v.status());
        return;
      }
      case Op::kAdd: {
        auto v = data_->add(key, q.number);
        c.out += v.is_ok() ? response(StatusCode::kOk, std::to_string(*v)) : response(v.status());
        return;
      }
      case Op::kCompareSet: {
        auto v = data_->compare_set(key, q.value, q.desired);
        c.out += v.is_ok() ? response(StatusCode::kOk, *v) : response(v.status());
        return;
      }
      case Op::kErase: {
        auto v = data_->erase(key);
        c.out += v.is_ok() ? response(StatusCode::kOk, *v ? "1" : "0") : response(v.status());
        return;
      }
      case Op::kGet:
      case Op::kWait:
        park(c, std::move(q));
        return;
    }
  }

  void park(Client& c, rendezvous::Request q) {
    c.parked = Parked{q.op, std::move(q.keys), rendezvous::wait_deadline(Clock::now(), q.number), q.number};
    unpark(c);
  }

  // Answers a parked request if its keys are set or its deadline has passed.
  void unpark(Client& c) {
    if (!c.parked) return;
    Parked& p = *c.parked;
    std::optional<std::string> value;
    for (const auto& key : p.keys) {
      auto v = data_->try_get(key);
      if (!v.is_ok() || !v->has_value()) {
        if (Clock::now() < p.deadline) return;
        c.out += response(wait_timeout_error(p.keys, Store::Duration(p.timeout_ms)));
        c.parked.reset();
        serve(c);
        return;
      }
      value = std::move(**v);
    }
    c.out += response(StatusCode::kOk, p.op == Op::kGet ? *value : "");
    c.parked.reset();
    serve(c);
  }

  int listen_fd_;
  int wake_fd_;
  uint16_t port_;
  std::shared_ptr<MemoryStore> data_;
  std::shared_ptr<Store> local_;
  std::list<Client> clients_;  // only the loop thread touches these
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const TcpStoreServerOptions& options) {
  EDT_ASSIGN_OR_RETURN(int listen_fd, net::listen_tcp(options.host, options.port));
  auto port = net::local_port(listen_fd);
  Status nb = net::set_nonblocking(listen_fd, true);
  int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (!port.is_ok() || !nb.is_ok() || wake_fd < 0) {
    int err = errno;
    ::close(listen_fd);
    if (wake_fd >= 0) ::close(wake_fd);
    if (!port.is_ok()) return port.status();
    if (!nb.is_ok()) return nb;
    return io_error("eventfd", err);
  }
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServerImpl(listen_fd, wake_fd, *port));
}

}  // namespace edt
