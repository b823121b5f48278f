// tcp_floor: what TCP on loopback allows a 2-rank allreduce, without edt.
//
//   build/bench/tcp_floor [--mib 64] [--iters 8]
//
// Two processes connected over 127.0.0.1 <-> 127.0.0.2 move exactly the
// bytes of a 2-rank ring allreduce of --mib MiB: two phases in which each
// sends half the buffer while it receives the other half (a thread sends,
// the main thread receives, blocking calls, the kernel's autotuned socket
// buffers). Four ways, each the median of --iters runs, as busbw (GB/s, =
// algbw for 2 ranks) so that it compares with bench/compare_allreduce:
//   copy           send() / recv() straight into the destination;
//   copy+reduce    as a real allreduce: the first phase's bytes land in a
//                  1 MiB staging buffer and are added to the input;
//   splice         the sender maps its pages into a pipe (vmsplice) and
//                  splices them into the socket: the kernel copies once;
//   splice+reduce  both.
// No edt code runs: this is the floor edt's TCP transport works against.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

void send_copy(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) die("send");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void send_splice(int fd, const char* p, size_t n) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) die("pipe");
  ::fcntl(pipefd[1], F_SETPIPE_SZ, 1 << 20);
  while (n > 0) {
    iovec iov{const_cast<char*>(p), std::min<size_t>(n, 1 << 20)};
    ssize_t k = ::vmsplice(pipefd[1], &iov, 1, 0);
    if (k <= 0) die("vmsplice");
    for (ssize_t left = k; left > 0;) {
      ssize_t s = ::splice(pipefd[0], nullptr, fd, nullptr, static_cast<size_t>(left), SPLICE_F_MOVE);
      if (s <= 0) die("splice");
      left -= s;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  ::close(pipefd[0]);
  ::close(pipefd[1]);
}

void recv_all(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k <= 0) die("recv");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

// out[i] = in[i] + arriving[i] for n bytes of float32, through a staging buffer.
void recv_reduce(int fd, const float* in, float* out, size_t n) {
  static std::vector<float> stage((1 << 20) / sizeof(float));
  for (size_t done = 0; done < n;) {
    const size_t want = std::min(n - done, stage.size() * sizeof(float));
    recv_all(fd, reinterpret_cast<char*>(stage.data()), want);
    const size_t first = done / sizeof(float);
    for (size_t i = 0; i < want / sizeof(float); ++i) out[first + i] = in[first + i] + stage[i];
    done += want;
  }
}

double one_allreduce(int fd, bool splice, bool reduce, const std::vector<float>& in, std::vector<float>& out) {
  const size_t half = in.size() * sizeof(float) / 2;
  const char* src = reinterpret_cast<const char*>(in.data());
  char* dst = reinterpret_cast<char*>(out.data());
  auto start = std::chrono::steady_clock::now();
  for (int phase = 0; phase < 2; ++phase) {
    std::thread sender([&] { (splice ? send_splice : send_copy)(fd, src + phase * half, half); });
    if (phase == 0 && reduce) {
      recv_reduce(fd, in.data(), out.data(), half);
    } else {
      recv_all(fd, dst + phase * half, half);
    }
    sender.join();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 64;
  int iters = 8;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) {
      mib = std::strtoul(argv[++i], nullptr, 10);
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: tcp_floor [--mib N] [--iters N]\n");
      return 2;
    }
  }
  if (mib == 0 || iters <= 0) {
    std::fprintf(stderr, "tcp_floor: --mib and --iters must be positive\n");
    return 2;
  }
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.2", &server.sin_addr);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0 || ::listen(listener, 1) != 0)
    die("bind 127.0.0.2");
  socklen_t len = sizeof server;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&server), &len);
  const pid_t child = ::fork();
  int fd;
  if (child == 0) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in client{};
    client.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &client.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&client), sizeof client) != 0) die("bind 127.0.0.1");
    if (::connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) die("connect");
  } else {
    fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) die("accept");
  }
  ::close(listener);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<float> in(mib << 18, 1.0f), out(mib << 18);
  const double bytes = static_cast<double>(mib << 20);
  if (child != 0) std::printf("| way | busbw GB/s (median of %d) | min | max |\n|---|---:|---:|---:|\n", iters);
  for (int way = 0; way < 4; ++way) {
    const bool splice = way >= 2, reduce = way % 2 == 1;
    std::vector<double> bw;
    for (int i = 0; i < iters; ++i) bw.push_back(bytes / one_allreduce(fd, splice, reduce, in, out) / 1e9);
    std::sort(bw.begin(), bw.end());
    if (child != 0) {
      std::printf("| %s%s | %.2f | %.2f | %.2f |\n", splice ? "splice" : "copy", reduce ? "+reduce" : "",
                  bw[bw.size() / 2], bw.front(), bw.back());
    }
  }
  ::close(fd);
  if (child != 0) {
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  return 0;
}
