// The worker supervisor of an edtrun job: the one component that starts
// workers, relays their output, receives edtrun's signals and stops workers.
// The static driver (driver.h) and the elastic driver (elastic_driver.h) are
// policies over it: they decide what to start and what an exit means; the
// supervisor does the process work the same way for both.
//
// Terms:
//   worker   one process of the job, known by its tag (an int the caller
//            picks: the rank for a static job, the worker's serial for an
//            elastic one). The tag is also the prefix of its output lines.
//   local    forked here with the command and its environment.
//   remote   `ssh host '<wrapper>'` (ssh.h): the wrapper prints
//            kStartedMarker once the host answered; until then the worker
//            has not started, and what ssh printed is held (at most
//            kEarlyOutputLimit bytes of each stream) instead of relayed.
//            The marker line is taken out of the output.
//   stop     SIGTERM to a local worker's process group, or closing a started
//            remote worker's stdin (its wrapper then stops the worker and
//            reports its status); SIGKILL to the group after the grace
//            period, plus kSshExtraGrace for a remote worker, whose wrapper
//            waits the grace period itself before its own SIGKILL.
//   drain    after a worker exited, its pipes are read until end of file
//            (a descendant in another session may hold them), for at most
//            kDrainTime; then the worker is forgotten.
//
// create() blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD for the whole process
// and receives them through a signalfd, and ignores SIGPIPE; so it must be
// called from the main thread before any other thread exists. Everything
// else is called from that thread too (not thread safe). The destructor
// kills and reaps every worker still running: nothing outlives it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edt/status.h"
#include "launcher/output.h"
#include "launcher/process.h"
#include "launcher/ssh.h"
#include "launcher/worker_env.h"

namespace edt::launcher {

struct SupervisorOptions {
  std::vector<std::string> command;              // what every worker runs
  std::string cwd;                               // remote workers start here
  SshOptions ssh;                                // how remote hosts are reached
  Environment launcher_env;                      // ssh's own environment
  std::chrono::milliseconds grace_period{5000};  // between SIGTERM and SIGKILL
  OutputSink* output = nullptr;                  // where output goes; not owned, outlives the supervisor
};

// One worker to start.
struct WorkerSpec {
  int tag = 0;       // its key here and its output prefix; unique among live workers
  std::string name;  // for messages: "rank 3 on host a"
  std::string host;
  bool remote = false;  // through ssh; else forked here
  Environment env;      // the worker's whole environment
};

struct WorkerExit {
  int tag = 0;
  ExitStatus status;
  bool started = false;      // a remote worker printed the marker (a local one always counts as started)
  bool stopped = false;      // stop() or kill_all() had been asked for it
  std::string early_stderr;  // remote, never started: what ssh printed (bounded)
};

// What one wait() saw, in the order a driver should handle it.
struct SupervisorEvents {
  std::vector<int> signals;        // SIGINT, SIGTERM or SIGHUP, as they arrived
  std::vector<int> ready_fds;      // the caller's extra descriptors that are readable
  std::vector<WorkerExit> exits;   // workers reaped (their output read first)
};

class Supervisor {
 public:
  static constexpr size_t kEarlyOutputLimit = 64 * 1024;
  static constexpr std::chrono::milliseconds kSshExtraGrace{2000};
  static constexpr std::chrono::milliseconds kDrainTime{2000};

  static Result<std::unique_ptr<Supervisor>> create(SupervisorOptions options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts a worker; returns its pid (the ssh client's for a remote one).
  // An error (kNotFound: no such command) means nothing was started.
  Result<pid_t> spawn(const WorkerSpec& spec);

  // Waits up to `timeout` for a signal, output, a worker's exit or one of
  // `extra_fds`; relays output, reaps, drains and escalates stops (SIGKILL
  // once a stopped worker's grace period is over), and reports what a
  // driver must act on.
  SupervisorEvents wait(std::chrono::milliseconds timeout, const std::vector<int>& extra_fds = {});

  // Stops worker `tag` once `delay` has passed (now if zero). A worker
  // already being stopped, or gone, is left as it is.
  void stop(int tag, std::chrono::milliseconds delay = std::chrono::milliseconds(0));
  // Stops every running worker now.
  void stop_all();
  // SIGKILL to every running worker now (edtrun was signalled twice).
  void kill_all();

  // Whether `tag` is known: running, or exited with output still draining.
  bool contains(int tag) const;
  bool running(int tag) const;
  bool started(int tag) const;
  bool stopping(int tag) const;                  // stop() was asked, whether or not it took effect yet
  std::string early_stderr(int tag) const;       // see WorkerExit
  int running_count() const;
  bool empty() const { return workers_.empty(); }

 private:
  struct Worker;
  explicit Supervisor(SupervisorOptions options);

  Worker* find(int tag) const;
  bool warm(const WorkerSpec& spec) const;
  void read_signals(SupervisorEvents& events);
  void read_output(Worker& worker, Stream stream);
  void deliver_stdout(Worker& worker, std::string_view bytes);
  void end_stream(Worker& worker, Stream stream);
  void reap(SupervisorEvents& events);
  void forget_drained();
  void escalate();
  void terminate(Worker& worker);
  // host_key_checking_configured() for `host`, asked once per host.
  bool host_keys_configured(const std::string& host, const std::vector<std::string>& env);

  SupervisorOptions options_;
  int signal_fd_ = -1;
  std::map<int, std::unique_ptr<Worker>> workers_;
  // By host: whether the ssh configuration says how to check its host key
  // (host_key_checking_configured), asked once.
  std::map<std::string, bool> host_keys_configured_;
};

}  // namespace edt::launcher
