// The TCP store client: one connection, calls serialised by a mutex.
//
// It never reconnects: a store whose server went away (the launcher exited)
// means the job is over, so after the first broken read or write every call
// returns kUnavailable naming the address, at once.
#include <unistd.h>

#include <charconv>
#include <mutex>

#include "common/net.h"
#include "edt/tcp_store.h"
#include "rendezvous/tcp_store_protocol.h"

namespace edt {
namespace {

using net::Clock;
using rendezvous::Op;
using rendezvous::FrameWriter;
using rendezvous::Reply;

// Waiting ops get this much beyond their own timeout before the client stops
// trusting the server to answer; plain ops get the default store timeout.
constexpr std::chrono::seconds kReplyMargin{10};

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(int fd, std::string address) : fd_(fd), address_(std::move(address)) {}
  ~TcpStoreClient() override { ::close(fd_); }

  Status set(const std::string& key, const std::string& value) override {
    return call(FrameWriter().u8(uint8_t(Op::kSet)).str(key).str(value), kDefaultTimeout).status();
  }

  Result<std::string> get(const std::string& key, Duration timeout) override {
    EDT_ASSIGN_OR_RETURN(Reply r, call(FrameWriter().u8(uint8_t(Op::kGet)).i64(timeout.count()).str(key),
                                       timeout + kReplyMargin));
    return std::move(r.value);
  }

  Result<std::optional<std::string>> try_get(const std::string& key) override {
    EDT_ASSIGN_OR_RETURN(Reply r, call(FrameWriter().u8(uint8_t(Op::kTryGet)).str(key), kDefaultTimeout));
    if (!r.present) return std::optional<std::string>();
    return std::optional<std::string>(std::move(r.value));
  }

  Result<int64_t> add(const std::string& key, int64_t delta) override {
    EDT_ASSIGN_OR_RETURN(Reply r, call(FrameWriter().u8(uint8_t(Op::kAdd)).str(key).i64(delta), kDefaultTimeout));
    int64_t sum = 0;
    auto [end, ec] = std::from_chars(r.value.data(), r.value.data() + r.value.size(), sum);
    if (ec != std::errc() || end != r.value.data() + r.value.size())
      return unavailable(what() + " sent a malformed reply (a sum of '" + r.value.substr(0, 32) + "')");
    return sum;
  }

  Result<std::string> compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) override {
    EDT_ASSIGN_OR_RETURN(
        Reply r, call(FrameWriter().u8(uint8_t(Op::kCompareSet)).str(key).str(expected).str(desired), kDefaultTimeout));
    return std::move(r.value);
  }

  Status wait(const std::vector<std::string>& keys, Duration timeout) override {
    if (keys.empty()) return Status::ok();
    FrameWriter w;
    w.u8(uint8_t(Op::kWait)).i64(timeout.count());
    for (const auto& key : keys) w.str(key);
    return call(w, timeout + kReplyMargin).status();
  }

  Result<bool> erase(const std::string& key) override {
    auto r = call(FrameWriter().u8(uint8_t(Op::kErase)).str(key), kDefaultTimeout);
    if (!r.is_ok()) return r.status();
    return r->value.size() == 1 && r->value[0] == '1';
  }

 private:
  Result<Reply> call(FrameWriter& request, Duration reply_within) {
    std::lock_guard lock(mu_);
    if (broken_) return unavailable(what() + " is gone (an earlier call lost the connection); the job must end or re-form");
    const std::string frame = request.take();
    const auto deadline = Clock::now() + reply_within;
    Status s = net::write_all(fd_, frame.data(), frame.size(), deadline, what());
    uint32_t n = 0;
    std::string body;
    if (s.is_ok()) s = net::read_all(fd_, &n, 4, deadline, what());
    if (s.is_ok() && n > rendezvous::kMaxFrameBytes) s = unavailable(what() + " sent a malformed reply");
    if (s.is_ok()) {
      body.resize(n);
      s = net::read_all(fd_, body.data(), n, deadline, what());
    }
    if (!s.is_ok()) {
      // A reply may still arrive later and would be taken for the answer to
      // the next call: the connection cannot be trusted any more.
      broken_ = true;
      if (s.code() == StatusCode::kTimeout) return unavailable(what() + " did not answer within " +
                                                               std::to_string(reply_within.count()) + " ms");
      return s;
    }
    auto reply = rendezvous::decode_reply(body);
    if (!reply.is_ok()) {
      broken_ = true;
      return unavailable(what() + " sent a malformed reply");
    }
    if (reply->code != StatusCode::kOk) return Status(reply->code, reply->value);
    return reply;
  }

  std::string what() const { return "TCP store at " + address_; }

  std::mutex mu_;
  int fd_;
  std::string address_;
  bool broken_ = false;  // guarded by mu_
};

}  // namespace

Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& host, uint16_t port, Store::Duration timeout) {
  const std::string address = net::format_host_port(host, port);
  auto fd = net::connect_tcp(host, port, Clock::now() + timeout);
  if (!fd.is_ok()) return fd.status().with_context("TCP store");
  (void)net::set_nodelay(*fd);
  return std::shared_ptr<Store>(std::make_shared<TcpStoreClient>(*fd, address));
}

Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& address, Store::Duration timeout) {
  auto hp = net::parse_host_port(address);
  if (!hp.is_ok()) return hp.status().with_context("EDT_COORDINATOR");
  return connect_tcp_store(hp->host, hp->port, timeout);
}

}  // namespace edt
