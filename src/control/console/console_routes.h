// What edtd adds to its HTTP server for the web console:
//
//   GET  /                                   the console's static files (web/, built)
//   GET  /api/v1/clusters/{name}/events      what happened to a cluster, oldest first
//   GET  /api/v1/clusters/{name}/jobs        the cluster's jobs, newest first
//   POST /api/v1/clusters/{name}/containers/{c}/terminal
//                                            a one-time terminal session:
//                                            {"port", "path"} of its WebSocket
//
// The API routes take the same bearer token and owner rules as the rest of
// /api/v1. Events are of two kinds: what the API did (Created, Scaled,
// Deleting: logged as requests succeed, to DATA_DIR/events/<cluster>.jsonl)
// and what the containers' status shows (a container Running since its
// start time, Failed with its message).
#pragma once

#include <string>

#include "control/backends/backend.h"
#include "control/console/terminal_server.h"
#include "control/jobs/job_runner.h"
#include "control/store/store.h"

namespace httplib {
class Server;
}

namespace edt::control {

struct ConsoleOptions {
  std::string web_dir;  // the built console; empty: not served
  std::string data_dir;
  ControlStore* store = nullptr;
  Backend* backend = nullptr;
  JobRunner* jobs = nullptr;
  TerminalServer* terminals = nullptr;
};

void install_console_routes(httplib::Server& server, const ConsoleOptions& options);

}  // namespace edt::control
