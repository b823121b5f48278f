#include "edt/status.h"

#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace edt {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kTimeout: return "Timeout";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kPeerFailed: return "PeerFailed";
    case StatusCode::kHostsUpdated: return "HostsUpdated";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kMalformed: return "Malformed";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
    case StatusCode::kUnauthenticated: return "Unauthenticated";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
  }
  return "Unknown";
}

const std::string& Status::empty() {
  static const std::string kEmpty;
  return kEmpty;
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message();
}

Status Status::with_context(const std::string& context) const {
  if (is_ok()) return *this;
  return Status(code_, field(), context + ": " + message(), fix());
}

Status io_error(const std::string& what, int err) {
  return Status(StatusCode::kIoError, what + ": " + std::strerror(err));
}

void check_failed(const char* file, int line, const char* expr, const std::string& message) {
  log::error("internal check failed at {}:{}: {}{}{}", file, line, expr, message.empty() ? "" : ": ", message);
  std::abort();
}

}  // namespace edt
