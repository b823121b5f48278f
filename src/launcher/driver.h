// The driver of one edtrun job: it hosts the job's TCP store, starts one
// worker per slot (forked on this machine, through ssh elsewhere), relays
// their output, and ends the job: when every worker has exited, when one
// fails (the others are stopped: SIGTERM, then SIGKILL after the grace
// period), or when edtrun itself gets SIGINT, SIGTERM or SIGHUP (every
// worker on every host is stopped the same way). Nothing it started is left
// running when run() returns.
//
// The input is a host list; the driver keeps one Worker per slot. The
// elastic mode builds on this: it changes the host list while the job runs,
// starting and stopping Workers and announcing each membership generation
// through the store.
//
// run() must be called from the main thread before any other thread exists:
// it blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD for the whole process and
// receives them through a signalfd.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edt/status.h"
#include "edt/tcp_store.h"
#include "launcher/hostfile.h"
#include "launcher/local_host.h"
#include "launcher/output.h"
#include "launcher/placement.h"
#include "launcher/process.h"
#include "launcher/ssh.h"
#include "launcher/worker_env.h"

namespace edt::launcher {

struct DriverOptions {
  std::vector<HostSlots> hosts;
  std::string hosts_source = "the default localhost:N";  // for messages ("--hostfile h.txt")
  int np = 1;
  std::vector<std::string> command;
  SshOptions ssh;
  std::chrono::milliseconds start_timeout{30000};  // for every remote worker to answer
  std::chrono::milliseconds grace_period{5000};    // between SIGTERM and SIGKILL
  std::string output_dir;                          // empty: prefixed lines on the terminal
  bool verbose = false;
  Environment exports;       // -x
  Environment launcher_env;  // edtrun's environment
  std::string cwd;           // where workers start, on every host
  LocalIdentity local = LocalIdentity::of_this_machine();
};

// This machine's address on the route to `host`: what a process there uses
// to reach us (the elastic driver needs it too).
Result<std::string> address_toward(const std::string& host);

class Driver {
 public:
  explicit Driver(DriverOptions options);
  ~Driver();

  // Runs the job to its end. The value is edtrun's exit code: 0, the code of
  // the first worker that failed (128 + signal if it was killed), 128 +
  // the signal edtrun got, or 1 when a worker could not be started. An error
  // means no worker was started (or every started one has been stopped).
  Result<int> run();

 private:
  struct Worker;

  Status validate_and_place();
  Status start_rendezvous();
  Rendezvous rendezvous_for(const std::string& host, bool remote) const;
  Status launch(Worker& worker);
  void event_loop();
  void handle_signals();
  void read_output(Worker& worker, Stream stream);
  void deliver_stdout(Worker& worker, std::string_view bytes);
  void on_exit(Worker& worker, const ExitStatus& status);
  void check_deadlines();
  void stop_all(const std::string& reason);
  void kill_all();
  void fail(int exit_code, const std::string& message);
  void log(const std::string& message) const;
  bool any_running() const;

  DriverOptions options_;
  std::vector<SlotInfo> slots_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<TcpStoreServer> store_;
  std::unique_ptr<OutputSink> output_;
  std::map<std::string, Rendezvous> rendezvous_;  // per host
  int signal_fd_ = -1;
  int exit_code_ = 0;
  bool failed_ = false;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point start_deadline_;
  std::chrono::steady_clock::time_point kill_deadline_;
  std::chrono::steady_clock::time_point ssh_kill_deadline_;
};

}  // namespace edt::launcher
