#include "control/console/jupyter_proxy.h"

#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include "common/io.h"
#include "common/net.h"
#include "control/api/middleware.h"
#include "control/console/random_hex.h"

namespace edt::control {

namespace {

using Clock = std::chrono::steady_clock;

// The cluster a /c/<cluster>/jupyter[/...] path names, or nullopt.
std::optional<std::string> cluster_of(const std::string& path) {
  const std::string prefix = JupyterProxy::kPrefix;
  if (!path.starts_with(prefix)) return std::nullopt;
  const size_t slash = path.find('/', prefix.size());
  if (slash == std::string::npos || slash == prefix.size()) return std::nullopt;
  const std::string_view rest = std::string_view(path).substr(slash);
  if (rest != "/jupyter" && !rest.starts_with("/jupyter/")) return std::nullopt;
  return path.substr(prefix.size(), slash - prefix.size());
}

std::string html_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// A refusal: a page for a browser, the API's error body for anyone else.
Reply problem(const Request& req, const Status& error) {
  const int status = http_status(error.code());
  if (req.get_header_value("Accept").find("text/html") == std::string::npos)
    return json_reply(status, error_json(status, error));
  Reply reply = text_reply("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Jupyter: " +
                               std::to_string(status) + "</title></head>\n<body><h1>Jupyter is not available</h1>\n"
                               "<p id=\"message\">" + html_escaped(error.message()) + "</p>\n<p id=\"fix\">" +
                               html_escaped(error.fix()) + "</p>\n</body></html>\n",
                           "text/html; charset=utf-8");
  reply.status = status;
  return reply;
}

// The value of cookie `name` in the request's Cookie headers, or "".
std::string cookie_value(const Request& req, const std::string& name) {
  auto [begin, end] = req.headers.equal_range("Cookie");
  for (auto it = begin; it != end; ++it) {
    std::string_view rest = it->second;
    while (!rest.empty()) {
      const size_t semi = rest.find(';');
      std::string_view pair = rest.substr(0, semi);
      while (pair.starts_with(' ')) pair.remove_prefix(1);
      if (pair.starts_with(name + "=")) return std::string(pair.substr(name.size() + 1));
      rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    }
  }
  return "";
}

// The Cookie header without edt's session cookie ("" when none is left).
std::string cookies_without(const std::string& header, const std::string& name) {
  std::string out;
  std::string_view rest = header;
  while (!rest.empty()) {
    const size_t semi = rest.find(';');
    std::string_view pair = rest.substr(0, semi);
    while (pair.starts_with(' ')) pair.remove_prefix(1);
    if (!pair.empty() && !pair.starts_with(name + "=")) out += (out.empty() ? "" : "; ") + std::string(pair);
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
  }
  return out;
}

bool contains_token(const std::string& header, const std::string& token) {
  std::string lower = header;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find(token) != std::string::npos;
}

bool is_upgrade(const Request& req) {
  return strcasecmp(req.get_header_value("Upgrade").c_str(), "websocket") == 0 &&
         contains_token(req.get_header_value("Connection"), "upgrade");
}

// Whether the request comes from no page, or from a page edtd served.
bool same_origin(const Request& req) {
  if (!req.has_header("Origin")) return true;
  const std::string origin = req.get_header_value("Origin");
  const std::string host = req.get_header_value("Host");
  return !host.empty() &&
         (strcasecmp(origin.c_str(), ("http://" + host).c_str()) == 0 ||
          strcasecmp(origin.c_str(), ("https://" + host).c_str()) == 0);
}

// The request as the notebook server gets it.
std::string upstream_request(const Request& req, const std::string& server_token, bool upgrade) {
  static const char* kDropped[] = {"Authorization", "Cookie", "Connection", "Keep-Alive", "Proxy-Connection",
                                   "Proxy-Authorization", "TE", "Trailer", "Upgrade"};
  std::string out = req.method + " " + req.target + " HTTP/1.1\r\n";
  for (const auto& [name, value] : req.headers) {
    bool dropped = false;
    for (const char* d : kDropped) dropped = dropped || strcasecmp(name.c_str(), d) == 0;
    if (!dropped) out += name + ": " + value + "\r\n";
  }
  if (std::string cookies = cookies_without(req.get_header_value("Cookie"), JupyterProxy::kCookie); !cookies.empty())
    out += "Cookie: " + cookies + "\r\n";
  out += "Authorization: token " + server_token + "\r\n";
  out += upgrade ? "Connection: Upgrade\r\nUpgrade: websocket\r\n" : "Connection: close\r\n";
  return out + "\r\n" + req.body;
}

// Moves bytes both ways until either end closes (or edtd shuts the
// client's socket on stopping).
void pump(int client, int server) {
  (void)net::set_nonblocking(client, true);
  (void)net::set_nonblocking(server, true);
  char buffer[65536];
  for (;;) {
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t n = ::recv(fds[i].fd, buffer, sizeof buffer, 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) return;
      const int to = i == 0 ? server : client;
      if (!io::write_all(to, std::string_view(buffer, static_cast<size_t>(n)), "Jupyter",
                         Clock::now() + std::chrono::seconds(30)).is_ok())
        return;
    }
  }
}

void tunnel(int client, std::string_view early, const JupyterEndpoint& endpoint, const std::string& request) {
  auto server = net::connect_tcp(endpoint.address, static_cast<uint16_t>(endpoint.port),
                                 Clock::now() + std::chrono::seconds(5));
  if (!server.is_ok()) {
    const std::string body = "{\"error\":{\"status\":502,\"field\":\"\",\"message\":\"the notebook server does not "
                             "answer\",\"fix\":\"reload the page; edtd starts it again\"}}";
    (void)io::write_all(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nContent-Length: " +
                                    std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body,
                        "client", Clock::now() + std::chrono::seconds(30));
    return;
  }
  if (io::write_all(*server, request + std::string(early), "Jupyter", Clock::now() + std::chrono::seconds(30)).is_ok())
    pump(client, *server);
  ::close(*server);
}

}  // namespace

JupyterProxyOptions jupyter_proxy_options(Service* service, JupyterServers* servers) {
  JupyterProxyOptions options;
  options.authenticate = [service](const std::string& token) { return service->authenticate(token); };
  options.endpoint = [service, servers](const User& user, const std::string& name) -> Result<JupyterEndpoint> {
    auto cluster = service->cluster(user, name);
    if (!cluster.is_ok()) return cluster.status();
    // The owner only, not the admin: the notebook's pages run in edtd's
    // origin, where the console keeps its token, and a tenant controls what
    // its notebook server serves.
    if (cluster->owner != user.name)
      return forbidden("name", "Jupyter opens for the cluster's owner only: its pages share edtd's origin",
                     "open a terminal in the cluster instead (the console's Terminal, or edt ssh " + name + ")");
    auto records = service->containers(user, name);
    if (!records.is_ok()) return records.status();
    for (const auto& record : *records) {
      if (record.status.index != 0) continue;
      if (record.status.phase != Phase::kRunning || record.status.leaving) break;
      return servers->ensure(*cluster, record);
    }
    return conflict("name", "the launcher of cluster " + name + " is not Running (the cluster is " +
                                to_string(cluster->phase) + ")",
                    "wait until it is Running: edt cluster get " + name);
  };
  return options;
}

Answer JupyterProxy::open(const Request& req, const User& user) {
  const std::string cluster = req.matches[1];
  auto endpoint = options_.endpoint(user, cluster);
  if (!endpoint.is_ok()) return endpoint.status();
  const std::string code = random_hex(32);
  {
    std::lock_guard<std::mutex> lock(mu_);
    logins_[code] = Grant{cluster, bearer_token(req.get_header_value("Authorization")).value_or(""),
                          Clock::now() + kLoginTtl};
  }
  return json_reply(201, {{"url", JupyterServers::base_url(cluster) + "?edt_login=" + code},
                          {"expires_in", kLoginTtl.count()}});
}

std::optional<JupyterProxy::Grant> JupyterProxy::take(std::map<std::string, Grant>& grants, const std::string& key,
                                                      bool spend) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = grants.begin(); it != grants.end();)  // expired ones go
    it = it->second.expires < Clock::now() ? grants.erase(it) : std::next(it);
  auto it = grants.find(key);
  if (it == grants.end()) return std::nullopt;
  Grant grant = it->second;
  if (spend) grants.erase(it);
  return grant;
}

Reply JupyterProxy::login(const Request& req, const std::string& cluster) {
  auto grant = take(logins_, req.get_param_value("edt_login"), /*spend=*/true);
  if (!grant || grant->cluster != cluster)
    return problem(req, unauthenticated("edt_login",
                                        "this Jupyter link was used already, has expired (after " +
                                            std::to_string(kLoginTtl.count()) + " s) or is for another cluster",
                                        "open Jupyter again from the console, or run: edt jupyter " + cluster));
  const std::string session = random_hex(32);
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_[session] = Grant{cluster, grant->token, Clock::now() + kSessionTtl};
  }
  Reply reply = text_reply("", "text/plain");
  reply.status = 303;
  const std::string path = req.target.substr(0, req.target.find('?'));
  reply.headers = {{"Location", path},
                   {"Set-Cookie", std::string(kCookie) + "=" + session + "; Path=" + JupyterServers::base_url(cluster) +
                                      "; HttpOnly; SameSite=Lax"},
                   {"Cache-Control", "no-store"}};
  return reply;
}

std::optional<std::string> JupyterProxy::caller_token(const Request& req, const std::string& cluster) {
  if (req.has_header("Authorization")) return bearer_token(req.get_header_value("Authorization"));
  auto session = take(sessions_, cookie_value(req, kCookie), /*spend=*/false);
  if (!session || session->cluster != cluster) return std::nullopt;
  return session->token;
}

std::optional<std::string> JupyterProxy::session_token(const Request& req) {
  auto session = take(sessions_, cookie_value(req, kCookie), /*spend=*/false);
  if (!session) return std::nullopt;
  return session->token;
}

Reply JupyterProxy::handle(Request& req) {
  auto cluster = cluster_of(req.path);
  if (!cluster) return problem(req, missing("", "no such path: Jupyter is at /c/<cluster>/jupyter/", "open Jupyter from the console"));
  if (req.has_param("edt_login")) return login(req, *cluster);
  const std::string again = "open Jupyter again from the console's cluster page, or run: edt jupyter " + *cluster;
  auto token = caller_token(req, *cluster);
  if (!token) return problem(req, unauthenticated("Authorization", "no edt token or Jupyter session was sent", again));
  auto user = options_.authenticate(*token);
  if (!user)
    return problem(req, unauthenticated("Authorization", "the token or session is no longer valid (revoked, expired "
                                                         "or its user deleted)", again));
  if (!same_origin(req))
    return problem(req, forbidden("Origin", "a page of another site (" + req.get_header_value("Origin") +
                                                ") may not use Jupyter through edtd",
                                  "open Jupyter from edtd's console"));
  auto endpoint = options_.endpoint(*user, *cluster);
  if (!endpoint.is_ok() && endpoint.status().code() == StatusCode::kNotFound)
    return problem(req, forbidden("name", "user " + user->name + " has no cluster '" + *cluster + "' to open Jupyter in",
                                  "open Jupyter in one of your clusters (edt cluster list)"));
  if (!endpoint.is_ok()) return problem(req, endpoint.status());
  Reply reply;
  reply.tunnel = [endpoint = *endpoint, request = upstream_request(req, endpoint->token, is_upgrade(req))](
                     int fd, std::string_view early) { tunnel(fd, early, endpoint, request); };
  return reply;
}

}  // namespace edt::control
