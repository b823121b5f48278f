// Request: one HTTP request as the API's routes see it, once the server
// (http_server.h) has read and checked it: method, the path with its
// %-escapes decoded, the raw target, headers (names case-insensitive),
// query parameters (decoded, '+' as space), the body, the caller's address
// and the path parameters the route's pattern matched (matches[1...]).
#pragma once

#include <strings.h>

#include <map>
#include <regex>
#include <string>
#include <string_view>

namespace edt::control {

struct CaseInsensitiveLess {
  bool operator()(const std::string& a, const std::string& b) const { return strcasecmp(a.c_str(), b.c_str()) < 0; }
};

struct Request {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // target's path, %-decoded
  std::multimap<std::string, std::string, CaseInsensitiveLess> headers;
  std::multimap<std::string, std::string> params;
  std::string body;
  std::string remote_addr;
  std::smatch matches;  // into `path`, set by the router

  bool has_header(const std::string& name) const { return headers.count(name) > 0; }
  std::string get_header_value(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  bool has_param(const std::string& name) const { return params.count(name) > 0; }
  std::string get_param_value(const std::string& name) const {
    auto it = params.find(name);
    return it == params.end() ? std::string() : it->second;
  }
};

// `text` with its %XX escapes decoded (a malformed one is kept as it is);
// with `plus_is_space`, '+' becomes ' ' (query strings).
std::string percent_decoded(std::string_view text, bool plus_is_space = false);

// The query string's "name=value" pairs, split on '&' and decoded.
std::multimap<std::string, std::string> parse_query(std::string_view query);

}  // namespace edt::control
