#include "cli/client.h"

#include <httplib.h>

#include <cstdlib>
#include <fstream>

#include "edt_api/contract.h"

namespace edt::cli {

using nlohmann::json;

std::string ApiFailure::to_string() const {
  if (status == 0) return message + "\n  fix: " + fix;
  std::string out = "refused (" + std::to_string(status) + "): ";
  if (!field.empty()) out += field + ": ";
  out += message;
  if (!fix.empty()) out += "\n  fix: " + fix;
  return out;
}

std::string config_path() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.config/edt/config.json";
}

Endpoint load_endpoint() {
  Endpoint e;
  std::ifstream in(config_path());
  if (in) {
    json config = json::parse(in, nullptr, false);
    if (config.is_object()) {
      e.api = config.value("api", e.api);
      e.token = config.value("token", e.token);
    }
  }
  if (const char* api = std::getenv("EDT_API")) e.api = api;
  if (const char* token = std::getenv("EDT_TOKEN")) e.token = token;
  return e;
}

Client::Client(Endpoint endpoint) : endpoint_(std::move(endpoint)), http_(new httplib::Client(endpoint_.api)) {
  http_->set_bearer_token_auth(endpoint_.token.c_str());
  http_->set_connection_timeout(5);
  http_->set_read_timeout(3600);
}

Client::~Client() = default;

namespace {

ApiFailure unreachable(const std::string& api, httplib::Error error) {
  return {0, "", "cannot reach edtd at " + api + " (" + httplib::to_string(error) + ")",
          "start edtd, or set EDT_API (or run edt login --api URL)"};
}

// edtd's error body ({"error": {field, message, fix}}) as a failure.
std::optional<ApiFailure> failure_of_body(int status, const json& body) {
  namespace detail = api::fields::ErrorDetail;
  const std::string error(api::fields::Error::error);
  if (!body.is_object() || !body.contains(error) || !body[error].is_object()) return std::nullopt;
  const json& e = body[error];
  return ApiFailure{status, e.value(std::string(detail::field), ""), e.value(std::string(detail::message), ""),
                    e.value(std::string(detail::fix), "")};
}

std::optional<ApiFailure> failure_of(const httplib::Result& res, const std::string& api) {
  if (!res) return unreachable(api, res.error());
  if (res->status < 400) return std::nullopt;
  json body = json::parse(res->body, nullptr, false);
  if (auto f = failure_of_body(res->status, body)) return f;
  return ApiFailure{res->status, "", res->body, ""};
}

}  // namespace

std::optional<ApiFailure> Client::call(const std::string& method, const std::string& path, const json* body,
                                       json* out) {
  const std::string url = "/api/v1" + path;
  const std::string text = body ? body->dump() : "";
  httplib::Result res = method == "GET"      ? http_->Get(url.c_str())
                        : method == "POST"   ? http_->Post(url.c_str(), text, "application/json")
                        : method == "PATCH"  ? http_->Patch(url.c_str(), text, "application/json")
                        : method == "PUT"    ? http_->Put(url.c_str(), text, "application/json")
                                             : http_->Delete(url.c_str());
  if (auto f = failure_of(res, endpoint_.api)) return f;
  if (out) *out = json::parse(res->body, nullptr, false);
  return std::nullopt;
}

std::optional<ApiFailure> Client::put_bytes(const std::string& path, const std::string& bytes, json* out) {
  httplib::Result res = http_->Put(("/api/v1" + path).c_str(), bytes, "application/octet-stream");
  if (auto f = failure_of(res, endpoint_.api)) return f;
  if (out) *out = json::parse(res->body, nullptr, false);
  return std::nullopt;
}

std::optional<ApiFailure> Client::get_text(const std::string& path, std::string* out) {
  httplib::Result res = http_->Get(("/api/v1" + path).c_str());
  if (auto f = failure_of(res, endpoint_.api)) return f;
  *out = res->body;
  return std::nullopt;
}

std::optional<ApiFailure> Client::stream(const std::string& path, const std::function<void(const char*, size_t)>& sink) {
  std::string error_body;
  int status = 0;
  httplib::Result res = http_->Get(
      ("/api/v1" + path).c_str(),
      [&](const httplib::Response& r) {
        status = r.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (status >= 400) {
          error_body.append(data, n);
        } else {
          sink(data, n);
        }
        return true;
      });
  if (!res) return unreachable(endpoint_.api, res.error());
  if (status >= 400) {
    if (auto f = failure_of_body(status, json::parse(error_body, nullptr, false))) return f;
    return ApiFailure{status, "", error_body, ""};
  }
  return std::nullopt;
}

}  // namespace edt::cli
