// Reading a request body's bytes as JSON, with the API's limits holding
// before anything walks the value: a body nested deeper than the limit, or
// with a key twice in one object, is refused while it is read (the reader
// never recurses and never builds the deep part), so nothing after it, a
// handler or an error message, can overflow the stack on it.
//
// Refusals are kMalformed Statuses (400) that name where in the body the
// problem is ("mounts[0].path" for a key sent twice, the path down to the
// limit for a body too deep) and quote no byte that is not UTF-8. Never
// throws; any thread.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

#include "control/model/error.h"

namespace edt::control {

struct JsonLimits {
  // Objects and arrays inside each other, the body's own object counting 1.
  size_t max_depth = 32;
};

// The JSON value of `bytes`, or why it is not one within `limits`.
Result<nlohmann::json> parse_request_json(std::string_view bytes, const JsonLimits& limits);

}  // namespace edt::control
