// What edtd adds to its API for the web console (the API's own routes, the
// cluster's jobs and events among them, and the console's static files at /
// are ApiServer's):
//
//   POST /api/v1/clusters/{name}/containers/{c}/terminal
//                                            a one-time terminal session:
//                                            {"port", "path"} of its WebSocket
//   POST /api/v1/clusters/{name}/jupyter     starts the cluster's notebook server
//                                            if need be: {"url", "expires_in"}, a
//                                            one-time login link (jupyter_proxy.h)
//
// They are routes of the API's table (api/http.h), served through the same
// middleware: the same bearer token, owner rules, metrics and error bodies.
#pragma once

#include <vector>

#include "control/api/handlers.h"
#include "control/api/http.h"
#include "control/console/jupyter_proxy.h"
#include "control/console/terminal_server.h"

namespace edt::control {

struct ConsoleOptions : ControlPlane {
  TerminalServer* terminals = nullptr;
  JupyterProxy* jupyter = nullptr;
};

std::vector<Route> console_routes(const ConsoleOptions& options);

}  // namespace edt::control
