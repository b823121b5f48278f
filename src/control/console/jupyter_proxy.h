// JupyterProxy: edtd's way to a cluster's notebook server
// (jupyter_servers.h), at /c/<cluster>/jupyter/... on the API's own port:
// HTTP requests and WebSockets (kernels and terminals speak over them) are
// passed to the server once the caller is known, so Jupyter needs no
// password and no port of its own.
//
// Who may pass: the cluster's owner (or the admin), named by either
//   - "Authorization: Bearer <token>", an edt token, as the API takes; or
//   - the cookie edt_jupyter_session (HttpOnly, SameSite=Lax, Path
//     /c/<cluster>/jupyter/), which a one-time login code exchanges for:
//     POST /api/v1/clusters/{name}/jupyter (bearer) gives the URL
//     /c/<name>/jupyter/?edt_login=<code>, valid kLoginTtl; opening it sets
//     the cookie and redirects to the same path without the code. A session
//     holds the token that asked for it: revoking the token, or deleting its
//     user, ends it at the next request; it lasts kSessionTtl at most.
// Another user is refused 403 (whether or not the cluster exists, so no
// name leaks); no credentials 401. A request whose Origin header is not
// edtd's own (http(s)://<Host>) is refused 403: a page of another site
// cannot drive a notebook with the user's cookie (cross-site request
// forgery, WebSocket hijacking).
//
// What reaches the server: the request as sent, less edt's credentials
// (Authorization, the session cookie) and hop-by-hop headers, plus the
// server's own token ("Authorization: token ..."), which only edtd knows.
// A plain request goes with "Connection: close" and its reply comes back
// byte for byte; a WebSocket upgrade is a byte pipe both ways once
// authorised, until either end closes. Refusals and a server that cannot
// start are a readable HTML page for a browser (Accept: text/html) and the
// API's JSON error body otherwise.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "control/api/http.h"
#include "control/console/jupyter_servers.h"
#include "control/service/service.h"

namespace edt::control {

struct JupyterProxyOptions {
  // The user a bearer token names, or nullopt (Service::authenticate).
  std::function<std::optional<User>(const std::string& token)> authenticate;
  // The cluster's notebook server, for `user`, started if need be; a
  // not-found refusal when the user has no cluster of that name.
  std::function<Result<JupyterEndpoint>(const User& user, const std::string& cluster)> endpoint;
};

// The options that join a Service and JupyterServers (edtd's).
JupyterProxyOptions jupyter_proxy_options(Service* service, JupyterServers* servers);

class JupyterProxy {
 public:
  static constexpr std::chrono::seconds kLoginTtl{300};
  static constexpr std::chrono::hours kSessionTtl{12};
  static constexpr const char* kPrefix = "/c/";
  static constexpr const char* kCookie = "edt_jupyter_session";

  explicit JupyterProxy(JupyterProxyOptions options) : options_(std::move(options)) {}

  // POST /api/v1/clusters/{name}/jupyter: starts the server if need be and
  // answers {"url": "/c/<name>/jupyter/?edt_login=<code>", "expires_in"}.
  Answer open(const Request& request, const User& user);
  // Every request under /c/.
  Reply handle(Request& request);

  // The edt token behind the request's Jupyter session cookie, while the
  // session lives (ApiServerOptions::session_token): JupyterLab holds
  // several WebSockets and loads its scripts in parallel, which the small
  // bounds of an address without a token would refuse. Quick; thread-safe.
  std::optional<std::string> session_token(const Request& request);

 private:
  struct Grant {
    std::string cluster;
    std::string token;  // the edt token it stands for
    std::chrono::steady_clock::time_point expires;
  };

  Reply login(const Request& request, const std::string& cluster);
  // The edt token the request carries for `cluster`: bearer, else session.
  std::optional<std::string> caller_token(const Request& request, const std::string& cluster);
  std::optional<Grant> take(std::map<std::string, Grant>& grants, const std::string& key, bool spend);

  JupyterProxyOptions options_;
  std::mutex mu_;
  std::map<std::string, Grant> logins_;    // guarded by mu_: one-time codes
  std::map<std::string, Grant> sessions_;  // guarded by mu_: cookie values
};

}  // namespace edt::control
