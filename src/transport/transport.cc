#include "transport/transport.h"

#include <poll.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "collectives/reduce.h"

namespace edt::transport {
namespace {

thread_local std::chrono::nanoseconds t_spin_limit = std::chrono::nanoseconds::max();

// sched_yield()s after the spin, before sleeping. With a doorbell only a few:
// blocking frees the core as well, and wakes the waiter as soon as it is rung.
constexpr uint32_t kYieldRounds = 2000;
constexpr uint32_t kYieldRoundsBeforeBlocking = 4;
constexpr auto kSlowCheckEvery = std::chrono::milliseconds(100);
// Sends at least this big go to a channel's sending thread when it has one;
// smaller ones are sent inline: waking the thread and being woken by it
// costs more than the overlap gains until messages reach some MiB.
constexpr size_t kPostSendBytes = 4 << 20;
// A blocked wait wakes up at least this often for the slow checks (abort()
// rings the doorbell itself).
constexpr auto kBlockLimit = std::chrono::milliseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Where one Recv stands: bytes done, and up to one element that arrived
// split across two pieces and waits for the rest before it is reduced.
struct RecvProgress {
  size_t done = 0;
  uint8_t carry[8];
  size_t carry_len = 0;
};

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

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void limit_thread_spin(std::chrono::nanoseconds limit) { t_spin_limit = limit; }

std::chrono::nanoseconds thread_spin_limit() { return t_spin_limit; }

bool Backoff::spinning() {
  // Reading the clock costs about as much as a pause: look every 16 idles.
  if (idles_ == 1) {
    const auto now = Clock::now();
    pause_until_ = now + std::min(spin_, kDefaultSpin);
    spin_until_ = now + spin_;
  }
  if (yields_ > 0) return false;
  return (idles_ & 15) != 0 || Clock::now() < pause_until_;
}

void Backoff::idle(bool may_block) {
  const bool blocking = doorbell_ && may_block;
  if (armed_ && blocking) {
    // The check after arming found nothing either: sleep until rung.
    armed_ = false;
    doorbell_->wait(ticket_, kBlockLimit);
    return;
  }
  disarm();
  ++idles_;
  if (spinning()) {
    cpu_relax();
  } else if (yields_ < (blocking ? kYieldRoundsBeforeBlocking : kYieldRounds) || Clock::now() < spin_until_) {
    ++yields_;
    sched_yield();
  } else if (blocking) {
    ticket_ = doorbell_->arm();
    armed_ = true;
  } else {
    timespec ts{0, 50'000};
    nanosleep(&ts, nullptr);
  }
}

bool Backoff::slow_check_due() {
  // Reading the clock on every spin would cost more than the spin itself.
  if ((idles_ & 1023) != 0 && yields_ == 0) return false;
  auto now = Clock::now();
  if (next_check_ == Clock::time_point{}) {
    next_check_ = now + kSlowCheckEvery;
    return false;
  }
  if (now < next_check_) return false;
  next_check_ = now + kSlowCheckEvery;
  return true;
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

Status Transport::exchange(std::span<const Send> sends, std::span<Recv> recvs) {
  if (is_broken()) return broken();
  std::vector<size_t> sent(sends.size(), 0);
  std::vector<bool> posted(sends.size(), false);
  std::vector<RecvProgress> got(recvs.size());
  // Only the first unfinished message per peer and direction may move, so
  // messages to one peer stay in order.
  std::vector<int> busy_send(peers_.size(), -1), busy_recv(peers_.size(), -1);
  size_t open = 0;
  for (const auto& s : sends) open += s.bytes > 0;
  for (const auto& r : recvs) open += r.bytes > 0;
  std::vector<int> waiting_on;
  std::vector<pollfd> fds;
  Backoff backoff(spin_, doorbell_);
  const auto spin = std::min(spin_, thread_spin_limit());
  auto last_progress = Clock::now();

  // Breaks the transport (which shuts the sockets down) and returns only
  // once no sending thread still reads a buffer of this exchange: the caller
  // may free them as soon as the error is back.
  auto fail_with = [&](const Status& s) {
    Status out = fail(s);
    for (size_t i = 0; i < sends.size(); ++i) {
      if (!posted[i] || sent[i] == sends[i].bytes) continue;
      Channel& ch = *channels_[sends[i].peer];
      for (;;) {
        auto n = ch.posted_sent();
        if (!n.is_ok() || *n == sends[i].bytes) break;
        pollfd p{ch.posted_fd(), POLLIN, 0};
        ::poll(&p, 1, 10);
      }
    }
    return out;
  };

  while (open > 0) {
    bool progressed = false;
    std::fill(busy_send.begin(), busy_send.end(), -1);
    std::fill(busy_recv.begin(), busy_recv.end(), -1);
    for (size_t i = 0; i < sends.size(); ++i) {
      const Send& s = sends[i];
      if (sent[i] == s.bytes || busy_send[s.peer] >= 0) continue;
      busy_send[s.peer] = static_cast<int>(i);
      Channel& ch = *channels_[s.peer];
      if (!posted[i] && sent[i] == 0 && s.bytes >= kPostSendBytes && ch.posts_sends()) {
        ch.post_send(static_cast<const uint8_t*>(s.data), s.bytes);
        posted[i] = true;
      }
      auto n = posted[i] ? ch.posted_sent()
                         : ch.try_send(static_cast<const uint8_t*>(s.data) + sent[i], s.bytes - sent[i]);
      if (!n.is_ok()) return fail_with(n.status());
      const size_t now = posted[i] ? *n : sent[i] + *n;
      if (now > sent[i]) {
        sent[i] = now;
        progressed = true;
        if (sent[i] == s.bytes) --open;
      }
    }
    for (size_t i = 0; i < recvs.size(); ++i) {
      Recv& r = recvs[i];
      RecvProgress& g = got[i];
      if (g.done == r.bytes || busy_recv[r.peer] >= 0) continue;
      busy_recv[r.peer] = static_cast<int>(i);
      Channel& ch = *channels_[r.peer];
      uint8_t* dst = static_cast<uint8_t*>(r.data);
      if (!r.reduce) {
        auto n = ch.try_recv(dst + g.done, r.bytes - g.done);
        if (!n.is_ok()) return fail_with(n.status());
        if (*n == 0) continue;
        g.done += *n;
      } else {
        auto piece = ch.peek();
        if (!piece.is_ok()) return fail_with(piece.status());
        std::span<const uint8_t> in = *piece;
        in = in.first(std::min(in.size(), r.bytes - g.done - g.carry_len));
        if (in.empty()) continue;
        const size_t esize = dtype_size(r.type);
        const uint8_t* with = r.with ? static_cast<const uint8_t*>(r.with) : dst;
        size_t used = 0;
        if (g.carry_len > 0) {
          size_t k = std::min(esize - g.carry_len, in.size());
          std::memcpy(g.carry + g.carry_len, in.data(), k);
          g.carry_len += k;
          used = k;
          if (g.carry_len == esize) {
            collectives::reduce(dst + g.done, with + g.done, g.carry, 1, r.type, r.op);
            g.done += esize;
            g.carry_len = 0;
          }
        }
        size_t whole = (in.size() - used) / esize * esize;
        collectives::reduce(dst + g.done, with + g.done, in.data() + used, whole / esize, r.type, r.op);
        g.done += whole;
        used += whole;
        size_t rest = in.size() - used;  // less than one element
        std::memcpy(g.carry + g.carry_len, in.data() + used, rest);
        g.carry_len += rest;
        used += rest;
        ch.consume(used);
      }
      progressed = true;
      if (g.done == r.bytes) --open;
    }
    if (progressed) {
      backoff.reset();
      last_progress = Clock::now();
      continue;
    }
    if (is_broken()) return fail_with(broken());
    // Idle: sockets are spun on, then waited on with poll(); memory channels
    // are spun on, then slept on with the doorbell.
    fds.clear();
    waiting_on.clear();
    bool memory_waits = false;
    for (int peer = 0; peer < size(); ++peer) {
      if (busy_send[peer] < 0 && busy_recv[peer] < 0) continue;
      waiting_on.push_back(peer);
      int fd = channels_[peer]->fd();
      if (fd < 0) {
        memory_waits = true;
        continue;
      }
      const bool send_posted = busy_send[peer] >= 0 && posted[busy_send[peer]];
      short events = (busy_send[peer] >= 0 && !send_posted ? POLLOUT : 0) | (busy_recv[peer] >= 0 ? POLLIN : 0);
      if (events != 0) fds.push_back({fd, events, 0});
      if (send_posted) fds.push_back({channels_[peer]->posted_fd(), POLLIN, 0});
    }
    if (!fds.empty() && !memory_waits) {
      // Sockets too are spun on (the peer's next bytes are often
      // microseconds away; sleeping in poll() costs a wake-up), as Backoff
      // spins: pausing, then yielding, then they are polled.
      if (const auto waited = Clock::now() - last_progress; waited < spin) {
        if (waited < Backoff::kDefaultSpin) {
          cpu_relax();
        } else {
          sched_yield();
        }
        continue;
      }
      // Wake up now and then to notice abort() and run the slow checks.
      if (::poll(fds.data(), fds.size(), 50) == 0) {
        Status s = check_waiting(waiting_on, last_progress, "a collective");
        if (!s.is_ok()) return fail_with(s);
      }
      continue;
    }
    backoff.idle(fds.empty());
    if (backoff.slow_check_due()) {
      Status s = check_waiting(waiting_on, last_progress, "a collective");
      if (!s.is_ok()) return fail_with(s);
    }
  }
  return Status::ok();
}

}  // namespace edt::transport
