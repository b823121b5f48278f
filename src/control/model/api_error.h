// ApiError: how edtd refuses a request. Every refusal names the field that
// was wrong (a JSON path such as "mounts[1].path", or "" for the request as
// a whole), says what was wrong and what to do instead, and carries the HTTP
// status the API answers with. The CLI prints the same three parts.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace edt::control {

struct ApiError {
  int http_status = 400;
  std::string field;
  std::string message;
  std::string fix;

  // {"error": {"status": 422, "field": "...", "message": "...", "fix": "..."}}
  nlohmann::json to_json() const;
};

// A check that passes (nullopt) or refuses with an ApiError.
using Refusal = std::optional<ApiError>;

inline ApiError bad_request(std::string field, std::string message, std::string fix) {
  return {400, std::move(field), std::move(message), std::move(fix)};
}
inline ApiError unprocessable(std::string field, std::string message, std::string fix) {
  return {422, std::move(field), std::move(message), std::move(fix)};
}
inline ApiError conflict(std::string field, std::string message, std::string fix) {
  return {409, std::move(field), std::move(message), std::move(fix)};
}
inline ApiError not_found_error(std::string field, std::string message, std::string fix) {
  return {404, std::move(field), std::move(message), std::move(fix)};
}

}  // namespace edt::control
