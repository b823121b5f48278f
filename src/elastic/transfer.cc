// Sliced state transfer (see transfer.h): one poll loop moves every
// connection's bytes, sending from the holder's pieces or receiving into the
// receiver's buffer, so that all slices travel at once.
#include "elastic/transfer.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/net.h"

namespace edt::elastic {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kChunk = 1 << 20;  // most bytes per send/recv call
constexpr auto kTick = std::chrono::milliseconds(50);

struct Request {
  uint64_t nonce = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// One connection's share of the transfer: bytes [at, end) of the state.
struct Stream {
  int fd = -1;
  size_t at = 0;
  size_t end = 0;
  int64_t moved = 0;
};

void close_all(std::vector<Stream>& streams) {
  for (auto& s : streams)
    if (s.fd >= 0) ::close(s.fd);
  streams.clear();
}

// Where byte `at` of the concatenated pieces is, and how many bytes follow
// it in its piece.
std::string_view piece_at(const Pieces& pieces, size_t at) {
  for (std::string_view p : pieces) {
    if (at < p.size()) return p.substr(at);
    at -= p.size();
  }
  return {};
}

// One send or recv on a ready stream. False when the peer is gone.
bool step(Stream& s, const Pieces* pieces, char* out, std::string* error) {
  const size_t want = std::min(kChunk, s.end - s.at);
  ssize_t n;
  if (pieces) {
    std::string_view from = piece_at(*pieces, s.at);
    n = ::send(s.fd, from.data(), std::min(want, from.size()), MSG_DONTWAIT | MSG_NOSIGNAL);
  } else {
    n = ::recv(s.fd, out + s.at, want, MSG_DONTWAIT);
  }
  if (n > 0) {
    s.at += static_cast<size_t>(n);
    s.moved += n;
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
  *error = n == 0 ? "closed the connection" : std::strerror(errno);
  return false;
}

// Moves every stream's bytes until all are done: sends from `pieces`
// (holder) or receives into `out` (receiver). `names[i]` names stream i's
// peer in errors.
Status pump(std::vector<Stream>& streams, const Pieces* pieces, char* out, const TransferControl& control,
            const std::vector<std::string>& names) {
  auto last_progress = Clock::now();
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < streams.size(); ++i) {
      if (streams[i].at == streams[i].end) continue;
      fds.push_back({streams[i].fd, static_cast<short>(pieces ? POLLOUT : POLLIN), 0});
      which.push_back(i);
    }
    if (fds.empty()) return Status::ok();
    if (control.cancelled()) return Status(StatusCode::kHostsUpdated, "a newer generation was announced");
    if (Clock::now() - last_progress > control.idle)
      return timeout_error("the state transfer moved no byte for " + std::to_string(control.idle.count()) + " ms");
    if (::poll(fds.data(), fds.size(), static_cast<int>(kTick.count())) < 0 && errno != EINTR)
      return io_error("poll", errno);
    for (size_t j = 0; j < fds.size(); ++j) {
      if (fds[j].revents == 0) continue;
      Stream& s = streams[which[j]];
      const size_t before = s.at;
      std::string error;
      if (!step(s, pieces, out, &error))
        return peer_failed("state transfer with " + names[which[j]] + ": " + error + " after " +
                           std::to_string(s.moved) + " bytes");
      if (s.at != before) last_progress = Clock::now();
    }
  }
}

// Waits for a connection on `fd`, giving up when cancelled or idle too long.
Result<int> accept_one(int fd, const TransferControl& control) {
  const auto deadline = Clock::now() + control.idle;
  for (;;) {
    if (control.cancelled()) return Status(StatusCode::kHostsUpdated, "a newer generation was announced");
    if (Clock::now() > deadline) return timeout_error("no worker came for its slice of the state");
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(kTick.count())) <= 0) continue;
    int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c >= 0) return c;
  }
}

}  // namespace

Range slice_of(size_t total, int k, int n) {
  const size_t base = total / static_cast<size_t>(n), extra = total % static_cast<size_t>(n);
  const size_t uk = static_cast<size_t>(k);
  const size_t begin = uk * base + std::min(uk, extra);
  return {begin, begin + base + (uk < extra ? 1 : 0)};
}

Result<std::unique_ptr<SliceServer>> SliceServer::open(const std::string& host) {
  EDT_ASSIGN_OR_RETURN(int fd, net::listen_tcp("0.0.0.0", 0));
  // No fixed buffer sizes: the kernel's autotuning grows each window to
  // what the link needs, which a fixed size would switch off.
  auto port = net::local_port(fd);
  if (!port.is_ok()) {
    ::close(fd);
    return port.status();
  }
  return std::unique_ptr<SliceServer>(new SliceServer(fd, net::format_host_port(host, *port)));
}

SliceServer::~SliceServer() { ::close(fd_); }

Result<int64_t> SliceServer::serve(const Pieces& pieces, int receivers, uint64_t nonce,
                                   const TransferControl& control) {
  size_t total = 0;
  for (std::string_view p : pieces) total += p.size();
  std::vector<Stream> streams;
  std::vector<std::string> names;
  Status status;
  while (status.is_ok() && static_cast<int>(streams.size()) < receivers) {
    auto fd = accept_one(fd_, control);
    if (!fd.is_ok()) {
      status = fd.status();
      break;
    }
    streams.push_back({*fd, 0, 0, 0});
    Request r;
    status = net::read_all(*fd, &r, sizeof r, Clock::now() + control.idle, "a worker asking for its slice");
    if (status.is_ok() && (r.nonce != nonce || r.begin > r.end || r.end > total))
      status = invalid_argument("a request for bytes [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                                ") of a " + std::to_string(total) + "-byte state for another transfer");
    streams.back().at = r.begin;
    streams.back().end = r.end;
    names.push_back("a joining worker");
  }
  if (status.is_ok()) status = pump(streams, &pieces, nullptr, control, names);
  int64_t sent = 0;
  for (const auto& s : streams) sent += s.moved;
  close_all(streams);
  if (!status.is_ok()) return status;
  return sent;
}

Status fetch_slices(const std::vector<std::string>& holders, char* out, size_t size, uint64_t nonce,
                    const TransferControl& control, std::vector<int64_t>* bytes_from) {
  std::vector<Stream> streams;
  Status status;
  const int n = static_cast<int>(holders.size());
  for (int k = 0; k < n && status.is_ok(); ++k) {
    auto where = net::parse_host_port(holders[k]);
    if (!where.is_ok()) {
      status = where.status();
      break;
    }
    auto fd = net::connect_tcp(where->host, where->port, Clock::now() + control.idle);
    if (!fd.is_ok()) {
      status = peer_failed("state transfer: " + fd.status().message());
      break;
    }
    const Range slice = slice_of(size, k, n);
    streams.push_back({*fd, slice.begin, slice.end, 0});
    const Request r{nonce, slice.begin, slice.end};
    status = net::write_all(*fd, &r, sizeof r, Clock::now() + control.idle, "the worker at " + holders[k]);
  }
  if (status.is_ok()) status = pump(streams, nullptr, out, control, holders);
  bytes_from->assign(holders.size(), 0);
  for (size_t k = 0; k < streams.size(); ++k) (*bytes_from)[k] = streams[k].moved;
  close_all(streams);
  if (status.code() == StatusCode::kUnavailable) return peer_failed(status.message());
  return status;
}

}  // namespace edt::elastic
