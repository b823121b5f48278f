// What edtd adds to its HTTP server for the web console (the API's own
// routes, the console's static files at / and cluster events are ApiServer's):
//
//   GET  /api/v1/clusters/{name}/jobs        the cluster's jobs, newest first
//   POST /api/v1/clusters/{name}/containers/{c}/terminal
//                                            a one-time terminal session:
//                                            {"port", "path"} of its WebSocket
//
// Both take the same bearer token and owner rules as the rest of /api/v1.
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
  std::string data_dir;
  ControlStore* store = nullptr;
  Backend* backend = nullptr;
  JobRunner* jobs = nullptr;
  TerminalServer* terminals = nullptr;
};

void install_console_routes(httplib::Server& server, const ConsoleOptions& options);

}  // namespace edt::control
