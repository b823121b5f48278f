// Error: how edtd refuses a request, in the terms of the request, not of a
// transport. Every refusal names the field that was wrong (a JSON path such
// as "mounts[1].path", or "" for the request as a whole), says what was
// wrong and what to do instead; its Kind says which sort of wrong it is.
// The HTTP edge (api/http_errors.h) maps a Kind to a status code; the CLI
// prints the same three parts.
//
// Checks return a Refusal (nullopt: passed); operations that make something
// return an Outcome<T>, the thing or the Error.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "edt/status.h"

namespace edt::control {

struct Error {
  enum class Kind {
    kMalformed,        // the request is not what the API reads at all (bad JSON)
    kInvalid,          // a value is wrong whatever exists
    kConflict,         // the value is fine but clashes with what exists or is happening
    kNotFound,         // it names something that does not exist
    kForbidden,        // it is someone else's, or needs the admin
    kUnauthenticated,  // no valid token
    kTooLarge,         // the request is over a size limit
    kInternal,         // edtd failed (the database, the file system)
  };
  Kind kind = Kind::kInvalid;
  std::string field;
  std::string message;
  std::string fix;
};

// A check that passes (nullopt) or refuses with an Error.
using Refusal = std::optional<Error>;

inline Error malformed(std::string field, std::string message, std::string fix) {
  return {Error::Kind::kMalformed, std::move(field), std::move(message), std::move(fix)};
}
inline Error invalid(std::string field, std::string message, std::string fix) {
  return {Error::Kind::kInvalid, std::move(field), std::move(message), std::move(fix)};
}
inline Error conflict(std::string field, std::string message, std::string fix) {
  return {Error::Kind::kConflict, std::move(field), std::move(message), std::move(fix)};
}
inline Error missing(std::string field, std::string message, std::string fix) {
  return {Error::Kind::kNotFound, std::move(field), std::move(message), std::move(fix)};
}
inline Error forbidden(std::string field, std::string message, std::string fix) {
  return {Error::Kind::kForbidden, std::move(field), std::move(message), std::move(fix)};
}

// A Status from below (the database, a backend) as a refusal of `field`:
// NotFound -> kNotFound, AlreadyExists and FailedPrecondition -> kConflict,
// InvalidArgument -> kInvalid, anything else -> kInternal.
Error error_from_status(const Status& status, const std::string& field);

// The value an operation made, or why it refused.
template <typename T>
class Outcome {
 public:
  Outcome(T value) : v_(std::move(value)) {}      // NOLINT: implicit, like Result
  Outcome(Error error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Error& error() const { return std::get<Error>(v_); }
  T& value() { return std::get<T>(v_); }
  const T& value() const { return std::get<T>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace edt::control
