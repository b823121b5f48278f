// Status and Result<T>: how every fallible call in libedt (and edtd)
// reports an error.
//
// A Status is either OK or carries a code and a message meant for a person:
// what went wrong, where (rank, host, file:line, field) and what to do.
// A refusal of a request (edtd's control plane) also names the field that
// was wrong (a JSON path such as "mounts[1].path", "" for the request as a
// whole) and a fix, what to do instead; other errors leave both empty.
// Result<T> holds a T or a non-OK Status. Both are cheap to move and to
// copy (an OK Status allocates nothing; an error's text is shared, never
// changed), and safe to use from any thread (they are values). Exceptions
// are used only where Python meets C++.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <variant>

namespace edt {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller passed a value that is wrong
  kNotFound,            // a named thing does not exist
  kAlreadyExists,       // a named thing exists and may not be made again
  kFailedPrecondition,  // the call is not valid in the current state
  kTimeout,             // a deadline passed before the operation finished
  kUnavailable,         // a peer or service could not be reached
  kPeerFailed,          // a peer of a collective died or hung up mid-operation
  kHostsUpdated,        // membership changed; form a new generation
  kAborted,             // the operation was stopped on purpose
  kIoError,             // the operating system reported an error
  kInternal,            // a bug in edt (edtd: the database or file system failed)
  // Appended, so that the codes above keep their numbers (the TCP store's
  // wire carries them).
  kMalformed,           // the input is not what is read at all (not JSON, not an object)
  kPermissionDenied,    // it is someone else's, or needs the admin
  kUnauthenticated,     // no valid credentials (token)
  kResourceExhausted,   // over a size limit or out of room
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : Status(code, "", std::move(message), "") {}
  // A refusal: what was wrong with `field` and the `fix`.
  Status(StatusCode code, std::string field, std::string message, std::string fix)
      : code_(code),
        detail_(std::make_shared<const Detail>(Detail{std::move(message), std::move(field), std::move(fix)})) {}

  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return detail_ ? detail_->message : empty(); }
  // The JSON path of the field a request got wrong ("" for the whole request, or none).
  const std::string& field() const { return detail_ ? detail_->field : empty(); }
  // What to do instead ("" when the error says none).
  const std::string& fix() const { return detail_ ? detail_->fix : empty(); }

  // "Timeout: waited 30s for key 'x'" — code name and message.
  std::string to_string() const;

  // The same status with `context` put in front of the message ("rank 3: ...").
  Status with_context(const std::string& context) const;

 private:
  struct Detail {
    std::string message;
    std::string field;
    std::string fix;
  };
  static const std::string& empty();

  StatusCode code_ = StatusCode::kOk;
  std::shared_ptr<const Detail> detail_;  // null when OK (or made by Status())
};

// Shorthands for the common codes.
inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status already_exists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status timeout_error(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status peer_failed(std::string m) { return {StatusCode::kPeerFailed, std::move(m)}; }
inline Status aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
// An I/O error with strerror(err) appended: io_error("connect to 1.2.3.4:5", errno).
Status io_error(const std::string& what, int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).is_ok()) v_ = Status(StatusCode::kInternal, "Result made from an OK Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return is_ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] void check_failed(const char* file, int line, const char* expr, const std::string& message);

}  // namespace edt

#define EDT_CONCAT_INNER(a, b) a##b
#define EDT_CONCAT(a, b) EDT_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define EDT_RETURN_IF_ERROR(expr)                 \
  do {                                            \
    ::edt::Status edt_status_ = (expr);           \
    if (!edt_status_.is_ok()) return edt_status_; \
  } while (0)

// `lhs = value of expr` (a Result<T>), or returns its Status from the enclosing function.
#define EDT_ASSIGN_OR_RETURN(lhs, expr) EDT_ASSIGN_OR_RETURN_IMPL(EDT_CONCAT(edt_result_, __LINE__), lhs, expr)
#define EDT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.is_ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

// An invariant of edt itself; failing it is a bug, so it aborts with the place.
#define EDT_CHECK(cond)                                                   \
  do {                                                                    \
    if (!(cond)) ::edt::check_failed(__FILE__, __LINE__, #cond, "");      \
  } while (0)
#define EDT_CHECK_MSG(cond, msg)                                          \
  do {                                                                    \
    if (!(cond)) ::edt::check_failed(__FILE__, __LINE__, #cond, (msg));   \
  } while (0)
