// The driver of a static edtrun job (a fixed -np): it hosts the job's TCP
// store, places one worker per slot (placement.h), starts them through the
// Supervisor (forked on this machine, through ssh elsewhere), and ends the
// job: when every worker has exited, when one fails (the others are
// stopped: SIGTERM, then SIGKILL after the grace period), when a remote
// worker does not start within the start timeout, or when edtrun itself
// gets SIGINT, SIGTERM or SIGHUP (every worker on every host is stopped the
// same way; a second signal kills them). Nothing it started is left running
// when run() returns.
//
// run() must be called from the main thread before any other thread exists
// (see supervisor.h).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edt/status.h"
#include "edt/tcp_store.h"
#include "launcher/job_options.h"
#include "launcher/output.h"
#include "launcher/placement.h"
#include "launcher/supervisor.h"
#include "launcher/worker_env.h"

namespace edt::launcher {

class StaticDriver {
 public:
  explicit StaticDriver(JobOptions options);
  ~StaticDriver();

  // Runs the job to its end. The value is edtrun's exit code: 0, the code of
  // the first worker that failed (128 + signal if it was killed), 128 +
  // the signal edtrun got, or 1 when a worker could not be started. An error
  // means no worker was started (or every started one has been stopped).
  Result<int> run();

 private:
  Status start_rendezvous();
  Status launch(const SlotInfo& slot);
  void handle(const SupervisorEvents& events);
  void on_signal(int sig);
  void on_exit(const WorkerExit& exit);
  void on_failed_start(const SlotInfo& slot, const WorkerExit& exit);
  void check_start_deadline();
  void fail(int exit_code, const std::string& message);
  bool remote(const SlotInfo& slot) const { return !options_.local.is_local(slot.host); }

  JobOptions options_;
  std::vector<SlotInfo> slots_;                   // by rank
  std::unique_ptr<TcpStoreServer> store_;
  std::unique_ptr<OutputSink> output_;
  std::unique_ptr<Supervisor> supervisor_;
  std::map<std::string, Rendezvous> rendezvous_;  // per host
  int exit_code_ = 0;
  bool failed_ = false;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point start_deadline_;
};

}  // namespace edt::launcher
