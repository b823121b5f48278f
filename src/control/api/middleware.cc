#include "control/api/middleware.h"

#include <httplib.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <regex>

#include "common/units.h"
#include "common/utf8.h"
#include "control/api/request_json.h"
#include "edt_api/contract.h"

namespace edt::control {

using nlohmann::json;

namespace limits = api::limits::RequestLimits;

// httplib's own limits are compiled into it; the contract must say what they are.
static_assert(limits::max_uri_bytes == CPPHTTPLIB_REQUEST_URI_MAX_LENGTH, "api/openapi.json: RequestLimits");
static_assert(limits::max_header_bytes == CPPHTTPLIB_HEADER_MAX_LENGTH, "api/openapi.json: RequestLimits");

std::string json_text(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

Reply json_reply(int status, const json& body) { return Reply{status, json_text(body), "application/json", {}}; }

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
  auto body = parse_request_json(req.body, JsonLimits{static_cast<size_t>(limits::max_depth)});
  if (!body.ok()) return body;
  if (!body->is_object())
    return malformed("", "the request body is a JSON " + std::string(body->type_name()) + ", not an object",
                     "send {...} with the fields the operation lists (see GET /api/v1/openapi.json)");
  return body;
}

Outcome<json> optional_json_body(const httplib::Request& req) {
  if (req.body.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  return json_body(req);
}

std::string route_regex(const std::string& pattern, std::vector<std::string>* names) {
  static const std::regex kParameter(R"(\{([A-Za-z_][A-Za-z0-9_]*)\})");
  std::string out;
  auto begin = std::sregex_iterator(pattern.begin(), pattern.end(), kParameter);
  size_t copied = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    out += pattern.substr(copied, static_cast<size_t>(it->position()) - copied) + "([^/]+)";
    names->push_back((*it)[1]);
    copied = static_cast<size_t>(it->position() + it->length());
  }
  return out + pattern.substr(copied);
}

namespace {

void send(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}

void refuse(httplib::Response& res, const Error& error) {
  const int status = http_status(error.kind);
  send(res, status, error_json(status, error));
}

// The token of an "Authorization: Bearer <token>" header: the scheme in any
// case (RFC 7235), one or more spaces; nullopt when it is not one.
std::optional<std::string> bearer_token(const std::string& header) {
  const std::string scheme = "bearer";
  if (header.size() <= scheme.size() || strncasecmp(header.c_str(), scheme.c_str(), scheme.size()) != 0 ||
      header[scheme.size()] != ' ')
    return std::nullopt;
  const size_t start = header.find_first_not_of(' ', scheme.size());
  if (start == std::string::npos) return std::nullopt;
  return header.substr(start);
}

// The user behind the request's bearer token, or why there is none.
Outcome<User> authenticate(const httplib::Request& req, Service* service) {
  const std::string fix = "send 'Authorization: Bearer <token>' (set EDT_TOKEN or run edt login)";
  if (!req.has_header("Authorization"))
    return Error{Error::Kind::kUnauthenticated, "Authorization", "no bearer token was sent", fix};
  const std::string header = req.get_header_value("Authorization");
  auto token = bearer_token(header);
  if (!token) {
    const std::string scheme = utf8::sanitized(header.substr(0, std::min(header.find(' '), size_t{20})));
    return Error{Error::Kind::kUnauthenticated, "Authorization",
                 "the Authorization header is not 'Bearer <token>' (its scheme is '" + scheme + "')", fix};
  }
  auto user = service->authenticate(*token);
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

// `text` with its %XX escapes decoded (a malformed one is kept as it is).
std::string percent_decoded(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The first query parameter of the request line whose name or value is not
// UTF-8. Read from the request line itself: httplib's params also hold the
// fields of a form-encoded body, which is read as JSON instead.
Refusal check_query(const httplib::Request& req, const std::string& fix) {
  const size_t mark = req.target.find('?');
  if (mark == std::string::npos) return std::nullopt;
  std::string_view query(req.target);
  query.remove_prefix(mark + 1);
  while (!query.empty()) {
    const std::string_view pair = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), pair.size() + 1));
    const std::string key = percent_decoded(pair.substr(0, pair.find('=')));
    if (!utf8::is_valid(key)) return malformed("query", "a query parameter's name is not UTF-8", fix);
    const size_t equals = pair.find('=');
    if (equals != std::string_view::npos && !utf8::is_valid(percent_decoded(pair.substr(equals + 1))))
      return malformed(key, "the query parameter '" + key + "' is not UTF-8", fix);
  }
  return std::nullopt;
}

// A path or query parameter that is not UTF-8, refused by its name: names
// and ids are UTF-8 text, and what is not cannot be quoted back in JSON.
Refusal check_parameters(const std::vector<std::string>& names, const httplib::Request& req) {
  const std::string fix = "percent-encode the UTF-8 bytes of the text, e.g. %C3%A9 for e-acute";
  for (size_t i = 0; i < names.size() && i + 1 < req.matches.size(); ++i) {
    if (!utf8::is_valid(req.matches[i + 1].str()))
      return malformed(names[i], "the path parameter '" + names[i] + "' is not UTF-8", fix);
  }
  return check_query(req, fix);
}

// What a route answers: its handler's answer once the caller may call it.
Answer answer_for(const Route& route, const std::vector<std::string>& parameters, const httplib::Request& req,
                  Service* service) {
  if (auto refused = check_parameters(parameters, req)) return *refused;
  if (route.access == Access::kPublic) return route.handler(req, User{});
  Outcome<User> user = authenticate(req, service);
  if (!user.ok()) return user.error();
  if (route.access == Access::kAdmin && !user->admin) return admin_only(route.admin_action);
  return route.handler(req, *user);
}

// One route's handler wrapped in auth, metrics (of the routes that need a
// token) and error mapping.
httplib::Server::Handler wrap(const Route& route, std::vector<std::string> parameters, Service* service,
                              RequestCounters* counters) {
  return [route, parameters, service, counters](const httplib::Request& req, httplib::Response& res) {
    const bool counted = route.access != Access::kPublic;
    if (counted) counters->requests++;
    Answer answer = answer_for(route, parameters, req, service);
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
    std::vector<std::string> parameters;
    const std::string pattern = route_regex(route.pattern, &parameters);
    auto handler = wrap(route, std::move(parameters), service, counters);
    if (route.method == "GET") {
      server.Get(pattern, handler);
    } else if (route.method == "POST") {
      server.Post(pattern, handler);
    } else if (route.method == "PATCH") {
      server.Patch(pattern, handler);
    } else if (route.method == "DELETE") {
      server.Delete(pattern, handler);
    } else {
      EDT_CHECK_MSG(false, "unknown method " + route.method);
    }
  }
}

namespace {

// Why httplib answered 400 before a route ran. It reads the request line,
// then the headers (REMOTE_ADDR is set once both are read), then the body.
Error unreadable(const httplib::Request& req) {
  const std::string bytes = std::to_string(limits::max_header_bytes);
  if (req.path.empty())
    return malformed("", "the request line is not 'METHOD /path HTTP/1.1' with a method edtd serves",
                     "send GET, POST, PATCH or DELETE to a path of GET /api/v1/openapi.json, over HTTP/1.1");
  if (!req.has_header("REMOTE_ADDR"))
    return malformed("", "a header line is over " + bytes + " bytes, or the headers did not end",
                     "keep each header line under " + bytes +
                         " bytes (a token is 68) and end the headers with an empty line");
  if (req.method != "GET" && req.method != "POST" && req.method != "PATCH" && req.method != "DELETE")
    return malformed("", "the method " + req.method + " is not served",
                     "use GET, POST, PATCH or DELETE (see GET /api/v1/openapi.json)");
  return malformed("", "the request body could not be read: it ended before its Content-Length",
                   "send as many bytes as Content-Length says");
}

// httplib's refusal `status` (no route ran, or none matched) as an Error.
Error httplib_refusal(const httplib::Request& req, int status, size_t max_body_bytes) {
  switch (status) {
    case 400: return unreadable(req);
    case 404: return missing("", "no such API route", "see GET /api/v1/openapi.json");
    case 413:
      if (req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded"))
        return {Error::Kind::kTooLarge, "Content-Type",
                "the request body is over " + format_size(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) +
                    ", the limit for Content-Type application/x-www-form-urlencoded",
                "send the JSON body with Content-Type: application/json (up to " + format_size(max_body_bytes) + ")"};
      return {Error::Kind::kTooLarge, "", "the request body is over " + format_size(max_body_bytes),
              "send a smaller body"};
    case 414:
      return malformed("", "the request line (method, path and query) is over " +
                               std::to_string(limits::max_uri_bytes) + " bytes",
                       "send a shorter path and query; names are at most 63 characters");
    case 416: return malformed("Range", "the Range header is not one edtd can read", "leave Range out");
    default:
      return {Error::Kind::kInternal, "", "edtd could not serve the request (HTTP " + std::to_string(status) + ")",
              "retry; if it persists, see edtd's log"};
  }
}

// A POST, PATCH or PUT must say how long its body is: without Content-Length
// httplib would read the body until the client closes (or its read timeout),
// and a chunked body is not held to the size limit. Refused with 411 before
// any of it is read. (httplib reads no body of a DELETE without one.)
httplib::Server::HandlerResponse require_length(const httplib::Request& req, httplib::Response& res,
                                                RequestCounters* counters) {
  if (req.method != "POST" && req.method != "PATCH" && req.method != "PUT")
    return httplib::Server::HandlerResponse::Unhandled;
  const bool chunked = req.has_header("Transfer-Encoding");
  if (!chunked && req.has_header("Content-Length")) return httplib::Server::HandlerResponse::Unhandled;
  counters->refusals++;
  const std::string what = chunked ? "a body sent with Transfer-Encoding (edtd reads Content-Length bodies only)"
                                   : "a " + req.method + " without Content-Length";
  send(res, 411,
       error_json(411, malformed("Content-Length", what + " is refused",
                                 "send Content-Length with the body's size in bytes (Content-Length: 0 for no body)")));
  res.set_header("Connection", "close");  // what the client sends next is not a request
  return httplib::Server::HandlerResponse::Handled;
}

}  // namespace

void install_error_handlers(httplib::Server& server, size_t max_body_bytes, RequestCounters* counters) {
  server.set_pre_routing_handler(
      [counters](const httplib::Request& req, httplib::Response& res) { return require_length(req, res, counters); });
  server.set_error_handler([max_body_bytes, counters](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    counters->refusals++;
    const int status = res.status;
    send(res, status, error_json(status, httplib_refusal(req, status, max_body_bytes)));
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    refuse(res, {Error::Kind::kInternal, "", "internal error: " + utf8::sanitized(what),
                 "retry; if it persists, see edtd's log"});
  });
}

}  // namespace edt::control
