#include "control/api/middleware.h"

#include <httplib.h>

#include "common/units.h"

namespace edt::control {

using nlohmann::json;

Reply json_reply(int status, const json& body) { return Reply{status, body.dump(), "application/json", {}}; }

Reply text_reply(std::string body, std::string content_type) {
  return Reply{200, std::move(body), std::move(content_type), {}};
}

int http_status(Error::Kind kind) {
  switch (kind) {
    case Error::Kind::kMalformed: return 400;
    case Error::Kind::kUnauthenticated: return 401;
    case Error::Kind::kForbidden: return 403;
    case Error::Kind::kNotFound: return 404;
    case Error::Kind::kConflict: return 409;
    case Error::Kind::kTooLarge: return 413;
    case Error::Kind::kInvalid: return 422;
    case Error::Kind::kInternal: return 500;
  }
  return 500;
}

json error_json(int status, const Error& e) {
  return json{{"error", {{"status", status}, {"field", e.field}, {"message", e.message}, {"fix", e.fix}}}};
}

Outcome<json> json_body(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded())
    return malformed("", "the request body is not valid JSON", "send a JSON object, e.g. {\"containers\": 4}");
  if (!body.is_object()) return malformed("", "the request body must be a JSON object", "send {...}");
  return body;
}

namespace {

void send(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void refuse(httplib::Response& res, const Error& error) {
  const int status = http_status(error.kind);
  send(res, status, error_json(status, error));
}

// The user behind the request's bearer token, or why there is none.
Outcome<User> authenticate(const httplib::Request& req, Service* service) {
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (header.compare(0, prefix.size(), prefix) != 0)
    return Error{Error::Kind::kUnauthenticated, "Authorization", "no bearer token was sent",
                 "send 'Authorization: Bearer <token>' (set EDT_TOKEN or run edt login)"};
  auto user = service->authenticate(header.substr(prefix.size()));
  if (!user)
    return Error{Error::Kind::kUnauthenticated, "Authorization", "the token is not valid",
                 "use a token from the admin (edt user create) or DIR/admin.token"};
  return *user;
}

void write_reply(httplib::Response& res, Reply& reply) {
  res.status = reply.status;
  if (reply.stream) return reply.stream(res);
  res.set_content(reply.body, reply.content_type);
}

// What a route answers: its handler's answer once the caller may call it.
Answer answer_for(const Route& route, const httplib::Request& req, Service* service) {
  if (route.access == Access::kPublic) return route.handler(req, User{});
  Outcome<User> user = authenticate(req, service);
  if (!user.ok()) return user.error();
  if (route.access == Access::kAdmin && !user->admin) return admin_only(route.admin_action);
  return route.handler(req, *user);
}

// One route's handler wrapped in auth, metrics (of the routes that need a
// token) and error mapping.
httplib::Server::Handler wrap(const Route& route, Service* service, RequestCounters* counters) {
  return [route, service, counters](const httplib::Request& req, httplib::Response& res) {
    const bool counted = route.access != Access::kPublic;
    if (counted) counters->requests++;
    Answer answer = answer_for(route, req, service);
    if (answer.ok()) {
      write_reply(res, *answer);
    } else {
      refuse(res, answer.error());
    }
    if (counted && res.status >= 400) counters->refusals++;
  };
}

}  // namespace

void install_routes(httplib::Server& server, const std::vector<Route>& routes, Service* service,
                    RequestCounters* counters) {
  for (const auto& route : routes) {
    auto handler = wrap(route, service, counters);
    if (route.method == "GET") {
      server.Get(route.pattern, handler);
    } else if (route.method == "POST") {
      server.Post(route.pattern, handler);
    } else if (route.method == "PATCH") {
      server.Patch(route.pattern, handler);
    } else if (route.method == "DELETE") {
      server.Delete(route.pattern, handler);
    } else {
      EDT_CHECK_MSG(false, "unknown method " + route.method);
    }
  }
}

void install_error_handlers(httplib::Server& server, size_t max_body_bytes, RequestCounters* counters) {
  server.set_error_handler([max_body_bytes, counters](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    counters->refusals++;
    if (res.status == 413) {
      refuse(res, {Error::Kind::kTooLarge, "", "the request body is over " + format_size(max_body_bytes),
                   "send a smaller body"});
    } else if (res.status == 404) {
      refuse(res, missing("", "no such API route", "see GET /api/v1/openapi.json"));
    } else {
      send(res, res.status,
           error_json(res.status, {Error::Kind::kInternal, "", "the request failed", "see GET /api/v1/openapi.json"}));
    }
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    refuse(res, {Error::Kind::kInternal, "", "internal error: " + what, "retry; if it persists, see edtd's log"});
  });
}

}  // namespace edt::control
