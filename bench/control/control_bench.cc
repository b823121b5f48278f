// Control-plane benchmark: starts a real edtd and measures
//   1. create a 2-container cluster until every container is Running,
//   2. scale it 2 -> 4 until all 4 are Running and the hostfile lists 4,
// each the median of --runs tries; then, with --clusters clusters present,
//   3. GET /api/v1/clusters at a fixed --rate (open loop: each request is
//      timed from when it was due, so a slow server cannot slow the load),
//   4. the same GETs back to back (closed loop) from 1 and --threads
//      connections, kept alive and with "Connection: close", each its
//      requests/s, p50 and p99,
// printing a table. wrk (closed loop, no rate control) can be pointed at the
// same daemon with --hold to compare.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/net.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())));
  return v[i];
}

class Bench {
 public:
  Bench(std::string edtd, std::string dir, std::string network, std::string user_namespaces)
      : edtd_(std::move(edtd)), dir_(std::move(dir)), network_(std::move(network)),
        user_namespaces_(std::move(user_namespaces)) {}

  bool start() {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    port_ = edt::net::free_port("127.0.0.1").value();
    const std::string listen = "127.0.0.1:" + std::to_string(port_);
    const std::string ssh = std::to_string(edt::net::free_port("0.0.0.0").value());
    pid_ = fork();
    if (pid_ == 0) {
      int log = open((dir_ + "/edtd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      dup2(log, 2);
      // A bridge's block is this bench's own too (198.18.81.0/24).
      const char* range = network_ == "loopback" ? "127.81.0.0/16" : "198.18.81.0/24";
      execl(edtd_.c_str(), "edtd", "--data-dir", dir_.c_str(), "--listen", listen.c_str(), "--network",
            network_.c_str(), "--address-range", range, "--ssh-port", ssh.c_str(), "--grace", "2s",
            "--user-namespaces", user_namespaces_.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 100; ++i) {
      if (httplib::Client(url()).Get("/healthz")) {
        std::ifstream(dir_ + "/admin.token") >> token_;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  void stop() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    std::filesystem::remove_all(dir_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::string& token() const { return token_; }

  json call(const std::string& method, const std::string& path, const json& body = nullptr) {
    httplib::Client c(url());
    c.set_bearer_token_auth(token_.c_str());
    httplib::Result r = method == "POST"    ? c.Post(path.c_str(), body.dump(), "application/json")
                        : method == "PATCH" ? c.Patch(path.c_str(), body.dump(), "application/json")
                        : method == "DELETE" ? c.Delete(path.c_str())
                                             : c.Get(path.c_str());
    if (!r) return json{{"error", "unreachable"}};
    return json::parse(r->body, nullptr, false);
  }

  // Seconds until the cluster is Running with `containers` containers and
  // its hostfile (the file the containers see) lists them all.
  double wait_running(const std::string& name, int containers, Clock::time_point since) {
    const std::string hostfile = dir_ + "/clusters/" + name + "/mpi/hostfile";
    for (;;) {
      json c = call("GET", "/api/v1/clusters/" + name);
      if (c.contains("status") && c["status"]["phase"] == "Running" &&
          static_cast<int>(c["status"]["containers"].size()) == containers) {
        std::ifstream in(hostfile);
        int lines = 0;
        for (std::string line; std::getline(in, line);) lines++;
        if (lines == containers) return std::chrono::duration<double>(Clock::now() - since).count();
      }
      if (c.contains("status") && c["status"]["phase"] == "Failed") return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  void delete_and_wait(const std::string& name) {
    call("DELETE", "/api/v1/clusters/" + name);
    while (!call("GET", "/api/v1/clusters/" + name).contains("error"))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

 private:
  std::string edtd_, dir_, network_, token_, user_namespaces_;
  int port_ = 0;
  pid_t pid_ = -1;
};

struct LoadResult {
  std::vector<double> latencies_ms;
  int errors = 0;
  double seconds = 0;
};

// When the next request is due, or nullopt when the load is over; any thread.
using Schedule = std::function<std::optional<Clock::time_point>()>;

// Sends GETs from `threads` clients, each when `due` says; each latency
// counts from the request's due time. With keep_alive false each request
// has a connection of its own ("Connection: close").
LoadResult run_load(const std::string& url, const std::string& token, const std::string& path, int threads,
                    bool keep_alive, const Schedule& due) {
  LoadResult result;
  std::mutex mu;
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      httplib::Client c(url);
      c.set_bearer_token_auth(token.c_str());
      c.set_keep_alive(keep_alive);
      std::vector<double> mine;
      int errors = 0;
      for (auto when = due(); when; when = due()) {
        std::this_thread::sleep_until(*when);
        auto r = c.Get(path.c_str());
        if (!r || r->status != 200) errors++;
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - *when).count());
      }
      std::lock_guard lock(mu);
      result.latencies_ms.insert(result.latencies_ms.end(), mine.begin(), mine.end());
      result.errors += errors;
    });
  }
  for (auto& w : workers) w.join();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

// `rate` GETs per second for `seconds` (open loop: each timed from when it
// was due, so a slow server cannot slow the load), kept-alive connections.
LoadResult open_loop(const std::string& url, const std::string& token, const std::string& path, int rate,
                     int seconds, int threads) {
  const int total = rate * seconds;
  auto next = std::make_shared<std::atomic<int>>(0);
  const auto start = Clock::now() + std::chrono::milliseconds(100);
  return run_load(url, token, path, threads, true, [=]() -> std::optional<Clock::time_point> {
    const int i = (*next)++;
    if (i >= total) return std::nullopt;
    return start + std::chrono::microseconds(static_cast<int64_t>(i) * 1000000 / rate);
  });
}

// GETs back to back for `seconds` from `connections` clients (closed loop, as wrk).
LoadResult closed_loop(const std::string& url, const std::string& token, const std::string& path, int seconds,
                       int connections, bool keep_alive) {
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  return run_load(url, token, path, connections, keep_alive, [end]() -> std::optional<Clock::time_point> {
    const auto now = Clock::now();
    if (now >= end) return std::nullopt;
    return now;
  });
}

void print_closed_loop(const char* what, const LoadResult& load) {
  printf("  %-34s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  (%zu requests, %d errors)\n", what,
         static_cast<double>(load.latencies_ms.size()) / load.seconds, percentile(load.latencies_ms, 50),
         percentile(load.latencies_ms, 99), load.latencies_ms.size(), load.errors);
}

}  // namespace

int main(int argc, char** argv) {
  std::string edtd = EDTD_PATH, dir = "/tmp/edt-control-bench", network = "loopback", user_namespaces = "off";
  int runs = 10, clusters = 100, rate = 500, seconds = 10, threads = 16, hold = 0;
  CLI::App app{"edt control-plane benchmark"};
  app.add_option("--edtd", edtd, "the edtd binary")->capture_default_str();
  app.add_option("--data-dir", dir, "edtd's data dir for the run (removed after)")->capture_default_str();
  app.add_option("--runs", runs, "tries per timing (the median is shown)")->capture_default_str();
  app.add_option("--clusters", clusters, "clusters present during the GET load")->capture_default_str();
  app.add_option("--rate", rate, "GET /api/v1/clusters per second")->capture_default_str();
  app.add_option("--seconds", seconds, "length of the GET load")->capture_default_str();
  app.add_option("--threads", threads, "connections of the GET load")->capture_default_str();
  app.add_option("--network", network, "edtd's --network: loopback, or bridge:NAME (as root)")->capture_default_str();
  app.add_option("--user-namespaces", user_namespaces, "edtd's --user-namespaces: off or on")->capture_default_str();
  app.add_option("--hold", hold, "seconds to keep edtd up after the load (for wrk; prints URL and token)");
  CLI11_PARSE(app, argc, argv);

  Bench bench(edtd, dir, network, user_namespaces);
  if (!bench.start()) {
    fprintf(stderr, "control_bench: edtd did not start; see %s/edtd.log\n", dir.c_str());
    return 1;
  }
  std::vector<double> create_s, scale_s;
  for (int i = 0; i < runs; ++i) {
    const std::string name = "bench-" + std::to_string(i);
    auto t0 = Clock::now();
    json made = bench.call("POST", "/api/v1/clusters", {{"name", name}, {"framework", "horovod"}, {"containers", 2}});
    if (made.contains("error")) {
      fprintf(stderr, "control_bench: create refused: %s\n", made.dump().c_str());
      bench.stop();
      return 1;
    }
    create_s.push_back(bench.wait_running(name, 2, t0));
    auto t1 = Clock::now();
    bench.call("PATCH", "/api/v1/clusters/" + name, {{"containers", 4}});
    scale_s.push_back(bench.wait_running(name, 4, t1));
    bench.delete_and_wait(name);
  }
  printf("%-46s %10s %10s %10s\n", "control plane (local backend)", "median", "min", "max");
  auto row = [](const char* what, const std::vector<double>& v) {
    printf("%-46s %9.3fs %9.3fs %9.3fs\n", what, percentile(v, 50), *std::min_element(v.begin(), v.end()),
           *std::max_element(v.begin(), v.end()));
  };
  if (runs > 0) row(("create 2 containers -> all Running (n=" + std::to_string(runs) + ")").c_str(), create_s);
  if (runs > 0) row(("scale 2 -> 4, Running + hostfile (n=" + std::to_string(runs) + ")").c_str(), scale_s);
  fflush(stdout);

  auto t_fill = Clock::now();
  for (int i = 0; i < clusters; ++i)
    bench.call("POST", "/api/v1/clusters", {{"name", "load-" + std::to_string(i)}, {"framework", "horovod"}, {"containers", 2}});
  for (int i = 0; i < clusters; ++i) bench.wait_running("load-" + std::to_string(i), 2, t_fill);
  double fill = std::chrono::duration<double>(Clock::now() - t_fill).count();
  LoadResult load = open_loop(bench.url(), bench.token(), "/api/v1/clusters", rate, seconds, threads);
  printf("\n%d clusters (%d containers) made and Running in %.1fs\n", clusters, 2 * clusters, fill);
  printf("GET /api/v1/clusters at %d req/s for %ds (open loop, %d connections): %zu requests, %d errors, "
         "%.0f req/s achieved\n",
         rate, seconds, threads, load.latencies_ms.size(), load.errors,
         static_cast<double>(load.latencies_ms.size()) / load.seconds);
  printf("  latency p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", percentile(load.latencies_ms, 50),
         percentile(load.latencies_ms, 90), percentile(load.latencies_ms, 99), percentile(load.latencies_ms, 100));
  printf("\nGET /api/v1/clusters back to back for %ds (closed loop, as wrk):\n", seconds);
  for (int connections : {1, threads}) {
    const std::string n = std::to_string(connections) + (connections == 1 ? " connection" : " connections");
    print_closed_loop(("keep-alive, " + n).c_str(),
                      closed_loop(bench.url(), bench.token(), "/api/v1/clusters", seconds, connections, true));
    print_closed_loop(("Connection: close, " + n).c_str(),
                      closed_loop(bench.url(), bench.token(), "/api/v1/clusters", seconds, connections, false));
  }
  fflush(stdout);
  if (hold > 0) {
    printf("\nedtd stays up %ds: %s token %s\n", hold, bench.url().c_str(), bench.token().c_str());
    fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(hold));
  }
  for (int i = 0; i < clusters; ++i) bench.call("DELETE", "/api/v1/clusters/load-" + std::to_string(i));
  for (int i = 0; i < clusters; ++i) bench.delete_and_wait("load-" + std::to_string(i));
  bench.stop();
  return 0;
}
