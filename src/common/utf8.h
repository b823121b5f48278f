// UTF-8 checks for bytes that come from outside (URLs, headers, request
// bodies, child processes' output) before they go into JSON or a log line,
// which must hold well-formed UTF-8 only.
//
// Well-formed is RFC 3629's: no overlong forms, no surrogates (U+D800 to
// U+DFFF), nothing above U+10FFFF, no truncated sequence. Pure functions;
// any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace edt::utf8 {

// The offset of the first byte that does not begin a well-formed sequence,
// or std::string_view::npos when all of `text` is well-formed.
size_t first_invalid(std::string_view text);

inline bool is_valid(std::string_view text) { return first_invalid(text) == std::string_view::npos; }

// `text` with each ill-formed sequence (each byte of it) replaced by U+FFFD,
// so that it can go into JSON; well-formed text comes back unchanged.
std::string sanitized(std::string_view text);

}  // namespace edt::utf8
