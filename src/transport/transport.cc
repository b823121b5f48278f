#include "transport/transport.h"

#include <poll.h>

#include <algorithm>
#include <cstring>

#include "kernels/reduce.h"

namespace edt::transport {
namespace {

// Sends at least this big go to a channel's sending thread when it has one;
// smaller ones are sent inline: waking the thread and being woken by it
// costs more than the overlap gains until messages reach some MiB.
constexpr size_t kPostSendBytes = 4 << 20;

}  // namespace

Result<size_t> Channel::try_recv(uint8_t* dst, size_t n) {
  EDT_ASSIGN_OR_RETURN(std::span<const uint8_t> piece, peek());
  size_t take = std::min(n, piece.size());
  if (take > 0) {
    std::memcpy(dst, piece.data(), take);
    consume(take);
  }
  return take;
}

Transport::Transport(int rank, std::vector<PeerInfo> peers, std::vector<std::unique_ptr<Channel>> channels,
                     std::chrono::milliseconds timeout, std::chrono::nanoseconds spin, Doorbell* doorbell)
    : rank_(rank),
      peers_(std::move(peers)),
      channels_(std::move(channels)),
      timeout_(timeout),
      spin_(spin),
      doorbell_(doorbell) {}

std::string Transport::describe(int rank) const { return "rank " + std::to_string(rank) + " (host " + host(rank) + ")"; }

Status Transport::fail(Status why) {
  {
    std::lock_guard lock(mu_);
    if (broken_.is_ok()) broken_ = std::move(why);
    if (broken_flag_.exchange(true)) return broken_;
  }
  for (auto& channel : channels_)
    if (channel) channel->poison();
  // A wait of this rank's on another thread may be blocked on the doorbell.
  if (doorbell_) doorbell_->ring();
  std::lock_guard lock(mu_);
  return broken_;
}

void Transport::abort() {
  (void)fail(aborted("rank " + std::to_string(rank_) + ": the communicator was aborted"));
}

Status Transport::broken() const {
  std::lock_guard lock(mu_);
  return broken_;
}

Status Transport::check_waiting(std::span<const int> peers, Clock::time_point last_progress, const char* what) {
  for (int peer : peers)
    if (channels_[peer]) EDT_RETURN_IF_ERROR(channels_[peer]->check_peer());
  if (Clock::now() - last_progress > timeout_) {
    std::string who;
    for (int peer : peers) who += (who.empty() ? "" : ", ") + describe(peer);
    return timeout_error("rank " + std::to_string(rank_) + " waited " + std::to_string(timeout_.count()) +
                         " ms in " + what + " for " + (who.empty() ? "its peers" : who) +
                         " without progress; a peer is stuck or too slow (raise the timeout with EDT_TIMEOUT)");
  }
  return Status::ok();
}

Status Transport::exchange(std::initializer_list<Send> sends, std::initializer_list<Recv> recvs) {
  std::vector<Recv> r(recvs);
  return exchange(std::span<const Send>(sends.begin(), sends.size()), std::span<Recv>(r));
}

// One exchange() call in progress. Each round moves what it can of every
// unfinished Send and Recv; only the first unfinished message per peer and
// direction may move, so that messages to one peer stay in order. A round
// that moved nothing idles: memory channels are spun on, then slept on with
// the doorbell; sockets are spun on, then waited on with poll().
class Transport::Exchange {
 public:
  Exchange(Transport& t, std::span<const Send> sends, std::span<Recv> recvs)
      : t_(t),
        sends_(sends),
        recvs_(recvs),
        sent_(sends.size(), 0),
        posted_(sends.size(), false),
        got_(recvs.size()),
        busy_send_(t.peers_.size(), -1),
        busy_recv_(t.peers_.size(), -1),
        backoff_(t.spin_, t.doorbell_) {
    for (const auto& s : sends) open_ += s.bytes > 0;
    for (const auto& r : recvs) open_ += r.bytes > 0;
  }

  Status run() {
    while (open_ > 0) {
      std::fill(busy_send_.begin(), busy_send_.end(), -1);
      std::fill(busy_recv_.begin(), busy_recv_.end(), -1);
      auto sent = move_sends();
      if (!sent.is_ok()) return fail(sent.status());
      auto received = move_recvs();
      if (!received.is_ok()) return fail(received.status());
      if (*sent || *received) {
        backoff_.reset();
        last_progress_ = Clock::now();
        continue;
      }
      if (t_.is_broken()) return fail(t_.broken());
      if (Status s = idle(); !s.is_ok()) return fail(s);
    }
    return Status::ok();
  }

 private:
  // Where one Recv stands: bytes done, and up to one element that arrived
  // split across two pieces and waits for the rest before it is reduced.
  struct RecvProgress {
    size_t done = 0;
    uint8_t carry[8];
    size_t carry_len = 0;
  };

  Channel& channel(int peer) { return *t_.channels_[peer]; }

  // Whether any send moved.
  Result<bool> move_sends() {
    bool moved = false;
    for (size_t i = 0; i < sends_.size(); ++i) {
      const Send& s = sends_[i];
      if (sent_[i] == s.bytes || busy_send_[s.peer] >= 0) continue;
      busy_send_[s.peer] = static_cast<int>(i);
      Channel& ch = channel(s.peer);
      if (!posted_[i] && sent_[i] == 0 && s.bytes >= kPostSendBytes && ch.posts_sends()) {
        ch.post_send(static_cast<const uint8_t*>(s.data), s.bytes);
        posted_[i] = true;
      }
      auto n = posted_[i] ? ch.posted_sent()
                          : ch.try_send(static_cast<const uint8_t*>(s.data) + sent_[i], s.bytes - sent_[i]);
      EDT_RETURN_IF_ERROR(n.status());
      const size_t now = posted_[i] ? *n : sent_[i] + *n;
      if (now == sent_[i]) continue;
      sent_[i] = now;
      moved = true;
      if (sent_[i] == s.bytes) --open_;
    }
    return moved;
  }

  // Whether any receive moved.
  Result<bool> move_recvs() {
    bool moved = false;
    for (size_t i = 0; i < recvs_.size(); ++i) {
      Recv& r = recvs_[i];
      RecvProgress& g = got_[i];
      if (g.done == r.bytes || busy_recv_[r.peer] >= 0) continue;
      busy_recv_[r.peer] = static_cast<int>(i);
      Channel& ch = channel(r.peer);
      EDT_ASSIGN_OR_RETURN(bool took, r.reduce ? take_reducing(ch, r, g) : take_copying(ch, r, g));
      if (!took) continue;
      moved = true;
      if (g.done == r.bytes) --open_;
    }
    return moved;
  }

  static Result<bool> take_copying(Channel& ch, Recv& r, RecvProgress& g) {
    EDT_ASSIGN_OR_RETURN(size_t n, ch.try_recv(static_cast<uint8_t*>(r.data) + g.done, r.bytes - g.done));
    g.done += n;
    return n > 0;
  }

  // Reduces what has arrived into r.data straight from the channel's buffer;
  // an element split across two pieces waits in g.carry for its rest.
  static Result<bool> take_reducing(Channel& ch, Recv& r, RecvProgress& g) {
    EDT_ASSIGN_OR_RETURN(std::span<const uint8_t> in, ch.peek());
    in = in.first(std::min(in.size(), r.bytes - g.done - g.carry_len));
    if (in.empty()) return false;
    const size_t esize = dtype_size(r.type);
    uint8_t* dst = static_cast<uint8_t*>(r.data);
    const uint8_t* with = r.with ? static_cast<const uint8_t*>(r.with) : dst;
    size_t used = 0;
    if (g.carry_len > 0) {
      size_t k = std::min(esize - g.carry_len, in.size());
      std::memcpy(g.carry + g.carry_len, in.data(), k);
      g.carry_len += k;
      used = k;
      if (g.carry_len == esize) {
        kernels::reduce(dst + g.done, with + g.done, g.carry, 1, r.type, r.op);
        g.done += esize;
        g.carry_len = 0;
      }
    }
    size_t whole = (in.size() - used) / esize * esize;
    kernels::reduce(dst + g.done, with + g.done, in.data() + used, whole / esize, r.type, r.op);
    g.done += whole;
    used += whole;
    size_t rest = in.size() - used;  // less than one element
    std::memcpy(g.carry + g.carry_len, in.data() + used, rest);
    g.carry_len += rest;
    used += rest;
    ch.consume(used);
    return true;
  }

  // One idle step: spins, blocks on the doorbell or polls the sockets, and
  // runs the slow checks (peers alive, timeout) now and then.
  Status idle() {
    collect_waits();
    if (!fds_.empty() && !memory_waits_) {
      // Sockets too are spun on (the peer's next bytes are often
      // microseconds away; sleeping in poll() costs a wake-up); then they
      // are polled, waking up now and then to notice abort() and run the
      // slow checks.
      if (backoff_.spin(last_progress_)) return Status::ok();
      if (::poll(fds_.data(), fds_.size(), 50) == 0) return t_.check_waiting(waiting_on_, last_progress_, kWhat);
      return Status::ok();
    }
    backoff_.idle(fds_.empty());
    if (backoff_.slow_check_due()) return t_.check_waiting(waiting_on_, last_progress_, kWhat);
    return Status::ok();
  }

  // The peers this round waits on, and the sockets to poll for them.
  void collect_waits() {
    fds_.clear();
    waiting_on_.clear();
    memory_waits_ = false;
    for (int peer = 0; peer < t_.size(); ++peer) {
      const int send = busy_send_[peer], recv = busy_recv_[peer];
      if (send < 0 && recv < 0) continue;
      waiting_on_.push_back(peer);
      const int fd = channel(peer).fd();
      if (fd < 0) {
        memory_waits_ = true;
        continue;
      }
      const bool send_posted = send >= 0 && posted_[send];
      short events = (send >= 0 && !send_posted ? POLLOUT : 0) | (recv >= 0 ? POLLIN : 0);
      if (events != 0) fds_.push_back({fd, events, 0});
      if (send_posted) fds_.push_back({channel(peer).posted_fd(), POLLIN, 0});
    }
  }

  // Breaks the transport (which shuts the sockets down) and returns only
  // once no sending thread still reads a buffer of this exchange: the caller
  // may free them as soon as the error is back.
  Status fail(const Status& why) {
    Status out = t_.fail(why);
    for (size_t i = 0; i < sends_.size(); ++i) {
      if (!posted_[i] || sent_[i] == sends_[i].bytes) continue;
      Channel& ch = channel(sends_[i].peer);
      for (;;) {
        auto n = ch.posted_sent();
        if (!n.is_ok() || *n == sends_[i].bytes) break;
        pollfd p{ch.posted_fd(), POLLIN, 0};
        ::poll(&p, 1, 10);
      }
    }
    return out;
  }

  static constexpr const char* kWhat = "a collective";

  Transport& t_;
  std::span<const Send> sends_;
  std::span<Recv> recvs_;
  std::vector<size_t> sent_;
  std::vector<bool> posted_;
  std::vector<RecvProgress> got_;
  // The message each peer is busy with this round (index into sends_ or
  // recvs_), or -1.
  std::vector<int> busy_send_, busy_recv_;
  size_t open_ = 0;  // messages with bytes left to move
  std::vector<int> waiting_on_;
  std::vector<pollfd> fds_;
  bool memory_waits_ = false;
  Backoff backoff_;
  Clock::time_point last_progress_ = Clock::now();
};

Status Transport::exchange(std::span<const Send> sends, std::span<Recv> recvs) {
  if (is_broken()) return broken();
  return Exchange(*this, sends, recvs).run();
}

}  // namespace edt::transport
