// How edtd refuses a request, in the terms of the request, not of a
// transport: a Status (edt/status.h) that names the field that was wrong (a
// JSON path such as "mounts[1].path", or "" for the request as a whole),
// says what was wrong and what to do instead (its fix); its code says which
// sort of wrong it is. The HTTP edge maps a code to a status code in one
// place, http_status() (api/middleware.cc, listed in api/http.h); the CLI
// prints the same three parts.
//
// Checks return a Status (OK: passed); operations that make something
// return a Result<T>, the thing or the refusal.
#pragma once

#include <string>
#include <utility>

#include "edt/status.h"

namespace edt::control {

// A refusal of one sort: its code says which, and so its HTTP status.
template <StatusCode kCode>
struct Refuse {
  Status operator()(std::string field, std::string message, std::string fix) const {
    return {kCode, std::move(field), std::move(message), std::move(fix)};
  }
};

// The request is not what the API reads at all (bad JSON, not an object): 400.
inline constexpr Refuse<StatusCode::kMalformed> malformed;
// A value is wrong whatever exists: 422.
inline constexpr Refuse<StatusCode::kInvalidArgument> invalid;
// The value is fine but clashes with what exists or is happening: 409.
inline constexpr Refuse<StatusCode::kFailedPrecondition> conflict;
// It names something that does not exist: 404.
inline constexpr Refuse<StatusCode::kNotFound> missing;
// It is someone else's, or needs the admin: 403.
inline constexpr Refuse<StatusCode::kPermissionDenied> forbidden;
// No valid token: 401.
inline constexpr Refuse<StatusCode::kUnauthenticated> unauthenticated;
// The request is over a size limit, or what it writes has no room: 413.
inline constexpr Refuse<StatusCode::kResourceExhausted> too_large;
// edtd failed (the database, the file system): 500.
inline constexpr Refuse<StatusCode::kInternal> internal;

// A Status from below (the database, a backend) as a refusal of `field`:
// its code and message, and the fix its code suggests. One that already
// names a fix (a refusal) is returned as it is.
inline Status as_refusal(const Status& st, const std::string& field) {
  if (st.is_ok() || !st.fix().empty()) return st;
  switch (st.code()) {
    case StatusCode::kNotFound: return {st.code(), field, st.message(), "check the name"};
    case StatusCode::kAlreadyExists: return {st.code(), field, st.message(), "choose another name"};
    case StatusCode::kFailedPrecondition: return {st.code(), field, st.message(), "wait, or change what it depends on"};
    case StatusCode::kInvalidArgument: return {st.code(), field, st.message(), "correct the value"};
    default: return {st.code(), field, st.message(), "retry; if it persists, see edtd's log"};
  }
}

}  // namespace edt::control
