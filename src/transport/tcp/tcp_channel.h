// A Channel over one TCP connection (non-blocking, TCP_NODELAY, large
// buffers). Received bytes that must be reduced are staged in a buffer of
// its own; plain receives go straight into the destination.
#pragma once

#include <memory>
#include <string>
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
  Status check_peer() override { return Status::ok(); }
  void poison() override;

 private:
  Status gone(int err) const;

  int fd_;
  std::string peer_;
  std::vector<uint8_t> staging_;
  size_t staged_begin_ = 0, staged_end_ = 0;
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
