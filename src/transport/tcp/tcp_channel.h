// A Channel over one TCP connection (non-blocking, TCP_NODELAY). Received
// bytes that must be reduced are staged in a buffer of its own; plain
// receives go straight into the destination.
//
// Large messages are sent by a thread of the channel's own (started with the
// first one), so that the kernel copies outgoing bytes on one core while the
// caller receives and reduces on another: on loopback and on fast links the
// kernel's copies, not the wire, bound the speed. The thread and the caller
// share the socket, each in its own direction.
//
// Socket buffers are asked at 2 MiB (the kernel doubles it; it caps the ask
// at net.core.[rw]mem_max, 208 KiB on a stock kernel, so raise those where
// links are fast): at 1 Gbit/s that is 30 ms of the link. A rank that
// is kept off its core for some milliseconds (ranks that share cores with
// each other or with other work) then stalls no link: its kernel keeps
// sending from the send buffer and taking in data for it. Measured across
// shaped hosts that share 2 cores (docs/performance.md, "Across hosts"),
// 256 KiB buffers lost 7-13 points of the link to 2 MiB ones in a run under
// heavy load, and were level with them in a calmer one. Ranks of one host
// talk over shared memory, so the bytes in flight that no longer stay in
// cache cost only the TCP-only setups on one machine.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/transport.h"

namespace edt::transport::tcp {

class TcpChannel final : public Channel {
 public:
  // Takes ownership of a connected socket. `peer` names the other side in
  // errors ("rank 1 (host b)").
  TcpChannel(int fd, std::string peer);
  ~TcpChannel() override;

  Result<size_t> try_send(const uint8_t* data, size_t n) override;
  Result<std::span<const uint8_t>> peek() override;
  void consume(size_t n) override;
  Result<size_t> try_recv(uint8_t* dst, size_t n) override;
  int fd() const override { return fd_; }
  bool posts_sends() const override { return event_fd_ >= 0; }
  void post_send(const uint8_t* data, size_t n) override;
  Result<size_t> posted_sent() override;
  int posted_fd() const override { return event_fd_; }
  Status check_peer() override { return Status::ok(); }
  void poison() override;

 private:
  Status gone(int err) const;
  void send_loop();
  // Sends all n bytes from the sending thread; fails if the channel stops.
  Status send_all(const uint8_t* data, size_t n);

  int fd_;
  int event_fd_;  // written by the sending thread when a posted message is done
  std::string peer_;
  std::vector<uint8_t> staging_;
  size_t staged_begin_ = 0, staged_end_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  const uint8_t* post_data_ = nullptr;  // guarded by mu_; set while posted
  size_t post_bytes_ = 0;               // guarded by mu_
  bool post_done_ = false;              // guarded by mu_
  Status post_status_;                  // guarded by mu_
  bool stopping_ = false;               // guarded by mu_
  std::atomic<size_t> post_progress_{0};  // bytes out before completion
  std::thread sender_;
};

// Prepares a listening socket for the mesh: returns the fd and its port.
struct Listener {
  int fd = -1;
  uint16_t port = 0;
};
Result<Listener> listen_for_peers();

// Connects the full mesh: rank r connects to every lower rank (at
// addresses[lower]) and accepts a connection from every higher rank, each
// introduced by a handshake carrying its rank and `nonce` (so stray or
// stale connections are refused). channels[peer] gets the connection for
// each peer in `peers`; others stay null.
Status connect_mesh(int rank, const std::vector<std::string>& addresses, const std::vector<bool>& peers,
                    Listener listener, uint64_t nonce, Clock::time_point deadline,
                    const std::vector<std::string>& names, std::vector<std::unique_ptr<Channel>>* channels);

}  // namespace edt::transport::tcp
