#include "control/api/middleware.h"

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

std::string json_text(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

Reply json_reply(int status, const json& body) { return Reply{status, json_text(body), "application/json", {}, {}, {}}; }

Reply text_reply(std::string body, std::string content_type) {
  return Reply{200, std::move(body), std::move(content_type), {}, {}, {}};
}

int http_status(StatusCode code) {
  switch (code) {
    case StatusCode::kMalformed: return 400;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kResourceExhausted: return 413;
    case StatusCode::kInvalidArgument: return 422;
    default: return 500;  // edtd failed: the database, the file system, a bug
  }
}

json error_json(int status, const Status& e) {
  return json{{"error", {{"status", status}, {"field", e.field()}, {"message", e.message()}, {"fix", e.fix()}}}};
}

Result<json> json_body(const Request& req) {
  auto body = parse_request_json(req.body, JsonLimits{static_cast<size_t>(limits::max_depth)});
  if (!body.is_ok()) return body;
  if (!body->is_object())
    return malformed("", "the request body is a JSON " + std::string(body->type_name()) + ", not an object",
                     "send {...} with the fields the operation lists (see GET /api/v1/openapi.json)");
  return body;
}

Result<json> optional_json_body(const Request& req) {
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

std::optional<std::string> bearer_token(const std::string& header) {
  const std::string scheme = "bearer";
  if (header.size() <= scheme.size() || strncasecmp(header.c_str(), scheme.c_str(), scheme.size()) != 0 ||
      header[scheme.size()] != ' ')
    return std::nullopt;
  const size_t start = header.find_first_not_of(' ', scheme.size());
  if (start == std::string::npos) return std::nullopt;
  return header.substr(start);
}

namespace {

// A query parameter (as the server decoded them) whose name or value is not UTF-8.
Status check_query(const Request& req, const std::string& fix) {
  for (const auto& [key, value] : req.params) {
    if (!utf8::is_valid(key)) return malformed("query", "a query parameter's name is not UTF-8", fix);
    if (!utf8::is_valid(value)) return malformed(key, "the query parameter '" + key + "' is not UTF-8", fix);
  }
  return Status::ok();
}

// A path or query parameter that is not UTF-8, refused by its name: names
// and ids are UTF-8 text, and what is not cannot be quoted back in JSON.
Status check_parameters(const std::vector<std::string>& names, const Request& req) {
  const std::string fix = "percent-encode the UTF-8 bytes of the text, e.g. %C3%A9 for e-acute";
  for (size_t i = 0; i < names.size() && i + 1 < req.matches.size(); ++i) {
    if (!utf8::is_valid(req.matches[i + 1].str()))
      return malformed(names[i], "the path parameter '" + names[i] + "' is not UTF-8", fix);
  }
  return check_query(req, fix);
}

// What a route answers: its handler's answer once the caller may call it.
Answer answer_for(const Route& route, const std::vector<std::string>& parameters, const Request& req,
                  Service* service) {
  EDT_RETURN_IF_ERROR(check_parameters(parameters, req));
  if (route.access == Access::kPublic) return route.handler(req, User{});
  Result<User> user = authenticate(req, service);
  if (!user.is_ok()) return user.status();
  if (route.access == Access::kAdmin && !user->admin) return admin_only(route.admin_action);
  return route.handler(req, *user);
}

// The reply for a refusal.
Reply error_reply(const Status& error) {
  const int status = http_status(error.code());
  return json_reply(status, error_json(status, error));
}

}  // namespace

// The user behind the request's bearer token, or why there is none.
Result<User> authenticate(const Request& req, Service* service) {
  const std::string fix = "send 'Authorization: Bearer <token>' (set EDT_TOKEN or run edt login)";
  if (!req.has_header("Authorization"))
    return unauthenticated("Authorization", "no bearer token was sent", fix);
  const std::string header = req.get_header_value("Authorization");
  auto token = bearer_token(header);
  if (!token) {
    const std::string scheme = utf8::sanitized(header.substr(0, std::min(header.find(' '), size_t{20})));
    return unauthenticated("Authorization",
                           "the Authorization header is not 'Bearer <token>' (its scheme is '" + scheme + "')", fix);
  }
  auto user = service->authenticate(*token);
  if (!user)
    return unauthenticated("Authorization",
                           "the token is not valid: no such token, or it was revoked, expired or its user deleted",
                           "use a live token: edt token create (with one that works), from the admin, or DIR/admin.token");
  return *user;
}

Router::Router(const std::vector<Route>& routes, Service* service, RequestCounters* counters)
    : service_(service), counters_(counters) {
  for (const auto& route : routes) {
    EDT_CHECK_MSG(route.method == "GET" || route.method == "POST" || route.method == "PATCH" ||
                      route.method == "PUT" || route.method == "DELETE",
                  "unknown method " + route.method);
    Entry entry{route, {}, {}};
    entry.regex = std::regex(route_regex(route.pattern, &entry.parameters));
    entries_.push_back(std::move(entry));
  }
}

std::optional<Reply> Router::dispatch(Request& req) const {
  for (const auto& entry : entries_) {
    if (entry.route.method != req.method || !std::regex_match(req.path, req.matches, entry.regex)) continue;
    const bool counted = entry.route.access != Access::kPublic;
    if (counted) counters_->requests++;
    Answer answer = answer_for(entry.route, entry.parameters, req, service_);
    Reply reply = answer.is_ok() ? std::move(*answer) : error_reply(answer.status());
    if (counted && reply.status >= 400) counters_->refusals++;
    return reply;
  }
  return std::nullopt;
}

}  // namespace edt::control
