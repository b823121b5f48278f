#include "transport/tcp/tcp_channel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/net.h"

namespace edt::transport::tcp {
namespace {

constexpr size_t kStagingBytes = 1 << 20;
constexpr int kSocketBufferBytes = 2 << 20;  // see tcp_channel.h

struct Hello {
  uint64_t nonce;
  int32_t rank;
  int32_t pad;
};

}  // namespace

TcpChannel::TcpChannel(int fd, std::string peer)
    : fd_(fd), event_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), peer_(std::move(peer)), staging_(kStagingBytes) {}

TcpChannel::~TcpChannel() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (sender_.joinable()) sender_.join();
  ::close(fd_);
  if (event_fd_ >= 0) ::close(event_fd_);
}

void TcpChannel::post_send(const uint8_t* data, size_t n) {
  {
    std::lock_guard lock(mu_);
    EDT_CHECK(post_data_ == nullptr);
    post_data_ = data;
    post_bytes_ = n;
    post_done_ = false;
    post_progress_.store(0, std::memory_order_relaxed);
    if (!sender_.joinable()) sender_ = std::thread([this] { send_loop(); });
  }
  cv_.notify_one();
}

Result<size_t> TcpChannel::posted_sent() {
  uint64_t events;
  if (event_fd_ >= 0) (void)!::read(event_fd_, &events, sizeof events);  // drain; the state is below
  std::lock_guard lock(mu_);
  if (!post_done_) return post_progress_.load(std::memory_order_relaxed);
  EDT_RETURN_IF_ERROR(post_status_);
  return post_bytes_;
}

void TcpChannel::send_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || (post_data_ && !post_done_); });
    if (stopping_) return;
    const uint8_t* data = post_data_;
    const size_t n = post_bytes_;
    lock.unlock();
    Status s = send_all(data, n);
    lock.lock();
    post_status_ = std::move(s);
    post_done_ = true;
    post_data_ = nullptr;
    const uint64_t one = 1;
    if (event_fd_ >= 0) (void)!::write(event_fd_, &one, sizeof one);
  }
}

Status TcpChannel::send_all(const uint8_t* data, size_t n) {
  size_t done = 0;
  while (done < n) {
    auto w = try_send(data + done, n - done);
    if (!w.is_ok()) return w.status();
    done += *w;
    // Below n: completion is reported by post_done_ alone.
    if (done < n) post_progress_.store(done, std::memory_order_relaxed);
    if (*w > 0) continue;
    pollfd p{fd_, POLLOUT, 0};
    // Wake up now and then to notice that the channel is being destroyed.
    ::poll(&p, 1, 50);
    std::lock_guard lock(mu_);
    if (stopping_) return aborted("the channel to " + peer_ + " was closed while sending");
  }
  return Status::ok();
}

Status TcpChannel::gone(int err) const {
  return peer_failed(peer_ + " hung up mid-collective (" + (err ? std::strerror(err) : "connection closed") +
                     "); its process died or it left the group");
}

Result<size_t> TcpChannel::try_send(const uint8_t* data, size_t n) {
  for (;;) {
    ssize_t w = ::send(fd_, data, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w >= 0) return static_cast<size_t>(w);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    return gone(errno);
  }
}

Result<std::span<const uint8_t>> TcpChannel::peek() {
  if (staged_begin_ == staged_end_) {
    staged_begin_ = staged_end_ = 0;
    for (;;) {
      ssize_t r = ::recv(fd_, staging_.data(), staging_.size(), MSG_DONTWAIT);
      if (r > 0) {
        staged_end_ = static_cast<size_t>(r);
        break;
      }
      if (r == 0) return gone(0);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return gone(errno);
    }
  }
  return std::span<const uint8_t>(staging_.data() + staged_begin_, staged_end_ - staged_begin_);
}

void TcpChannel::consume(size_t n) { staged_begin_ += n; }

Result<size_t> TcpChannel::try_recv(uint8_t* dst, size_t n) {
  if (staged_begin_ != staged_end_) return Channel::try_recv(dst, n);
  for (;;) {
    ssize_t r = ::recv(fd_, dst, n, MSG_DONTWAIT);
    if (r > 0) return static_cast<size_t>(r);
    if (r == 0) return gone(0);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    return gone(errno);
  }
}

void TcpChannel::poison() { ::shutdown(fd_, SHUT_RDWR); }

Result<Listener> listen_for_peers() {
  EDT_ASSIGN_OR_RETURN(int fd, net::listen_tcp("0.0.0.0", 0));
  // Accepted sockets inherit the buffer sizes, which fix the window scale.
  net::set_buffer_sizes(fd, kSocketBufferBytes);
  auto port = net::local_port(fd);
  if (!port.is_ok()) {
    ::close(fd);
    return port.status();
  }
  return Listener{fd, *port};
}

namespace {

Status tune(int fd) {
  net::set_buffer_sizes(fd, kSocketBufferBytes);
  EDT_RETURN_IF_ERROR(net::set_nodelay(fd));
  return net::set_nonblocking(fd, true);
}

}  // namespace

Status connect_mesh(int rank, const std::vector<std::string>& addresses, const std::vector<bool>& peers,
                    Listener listener, uint64_t nonce, Clock::time_point deadline,
                    const std::vector<std::string>& names, std::vector<std::unique_ptr<Channel>>* channels) {
  struct CloseListener {
    int fd;
    ~CloseListener() { ::close(fd); }
  } closer{listener.fd};
  const int size = static_cast<int>(addresses.size());
  // Lower ranks first: they accept while we connect, so no cycle waits.
  for (int peer = 0; peer < rank; ++peer) {
    if (!peers[peer]) continue;
    EDT_ASSIGN_OR_RETURN(net::HostPort hp, net::parse_host_port(addresses[peer]));
    auto fd = net::connect_tcp(hp.host, hp.port, deadline);
    if (!fd.is_ok()) return fd.status().with_context("rank " + std::to_string(rank) + " connecting to " + names[peer]);
    // Small buffers are fixed at connect time, so tune before sending data.
    net::set_buffer_sizes(*fd, kSocketBufferBytes);
    Hello hello{nonce, rank, 0};
    Status s = net::write_all(*fd, &hello, sizeof hello, deadline, names[peer]);
    if (s.is_ok()) s = tune(*fd);
    if (!s.is_ok()) {
      ::close(*fd);
      return s;
    }
    (*channels)[peer] = std::make_unique<TcpChannel>(*fd, names[peer]);
  }
  int expected = 0;
  for (int peer = rank + 1; peer < size; ++peer) expected += peers[peer];
  EDT_RETURN_IF_ERROR(net::set_nonblocking(listener.fd, true));
  while (expected > 0) {
    pollfd p{listener.fd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100))) < 0) {
      if (left > 0 && errno == EINTR) continue;
      std::string missing;
      for (int peer = rank + 1; peer < size; ++peer)
        if (peers[peer] && !(*channels)[peer]) missing += (missing.empty() ? "" : ", ") + names[peer];
      return timeout_error("rank " + std::to_string(rank) + " waited for connections from " + missing +
                           "; they did not connect (firewall, wrong address, or they failed)");
    }
    int fd = ::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Hello hello{};
    Status s = net::read_all(fd, &hello, sizeof hello, std::min(deadline, Clock::now() + std::chrono::seconds(5)),
                             "a connecting peer");
    if (!s.is_ok() || hello.nonce != nonce || hello.rank <= rank || hello.rank >= size || !peers[hello.rank] ||
        (*channels)[hello.rank]) {
      ::close(fd);  // stale, stray or duplicate: not one of ours
      continue;
    }
    s = tune(fd);
    if (!s.is_ok()) {
      ::close(fd);
      return s;
    }
    (*channels)[hello.rank] = std::make_unique<TcpChannel>(fd, names[hello.rank]);
    --expected;
  }
  return Status::ok();
}

}  // namespace edt::transport::tcp
