/* tcp_rtt: the bare TCP round trip between two hosts, without any library.
 *
 *   tcp_rtt serve PORT                       (on one host; answers one client)
 *   tcp_rtt ping ADDRESS PORT [BYTES] [ITERS] (on the other)
 *
 * The client sends BYTES (default 4096) and waits for BYTES back, ITERS times
 * (default 2000, after 200 untimed), over one connection with TCP_NODELAY and
 * blocking calls: the floor of one step of a latency-bound collective. It
 * prints the median and mean round trip in microseconds as
 * "rtt_us median=M mean=A". */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char* what) {
  perror(what);
  exit(1);
}

static void move_all(int fd, char* buf, size_t n, int sending) {
  size_t done = 0;
  while (done < n) {
    ssize_t k = sending ? send(fd, buf + done, n - done, MSG_NOSIGNAL) : recv(fd, buf + done, n - done, 0);
    if (k <= 0) die(sending ? "send" : "recv (the peer left)");
    done += (size_t)k;
  }
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static int serve(int port) {
  int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = INADDR_ANY};
  if (bind(lfd, (struct sockaddr*)&a, sizeof a) || listen(lfd, 1)) die("bind/listen");
  printf("listening\n");
  fflush(stdout);
  int fd = accept(lfd, NULL, NULL);
  if (fd < 0) die("accept");
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  size_t bytes;
  move_all(fd, (char*)&bytes, sizeof bytes, 0);
  char* buf = malloc(bytes);
  for (;;) {
    size_t done = 0;
    while (done < bytes) {
      ssize_t k = recv(fd, buf + done, bytes - done, 0);
      if (k == 0 && done == 0) return 0; /* the client is done */
      if (k <= 0) die("recv");
      done += (size_t)k;
    }
    move_all(fd, buf, bytes, 1);
  }
}

static int ping(const char* address, int port, size_t bytes, int iters) {
  int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, address, &a.sin_addr) != 1) die("address");
  if (connect(fd, (struct sockaddr*)&a, sizeof a)) die("connect");
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  move_all(fd, (char*)&bytes, sizeof bytes, 1);
  char* buf = calloc(bytes, 1);
  double* t = malloc(sizeof(double) * (size_t)iters);
  double sum = 0;
  for (int i = -200; i < iters; ++i) {
    double t0 = now_us();
    move_all(fd, buf, bytes, 1);
    move_all(fd, buf, bytes, 0);
    if (i >= 0) sum += t[i] = now_us() - t0;
  }
  qsort(t, (size_t)iters, sizeof(double), cmp);
  printf("rtt_us median=%.2f mean=%.2f bytes=%zu iters=%d\n", t[iters / 2], sum / iters, bytes, iters);
  close(fd);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && !strcmp(argv[1], "serve")) return serve(atoi(argv[2]));
  if (argc >= 4 && !strcmp(argv[1], "ping"))
    return ping(argv[2], atoi(argv[3]), argc > 4 ? (size_t)atol(argv[4]) : 4096, argc > 5 ? atoi(argv[5]) : 2000);
  fprintf(stderr, "usage: tcp_rtt serve PORT | tcp_rtt ping ADDRESS PORT [BYTES] [ITERS]\n");
  return 2;
}
