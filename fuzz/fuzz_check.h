// What every fuzz target shares. A target is one LLVMFuzzerTestOneInput
// over a parser that reads outside input; besides crashes and what ASan and
// UBSan catch, it checks with FUZZ_CHECK the parser's own promises (an
// error says why, what parses formats back the same), and a broken promise
// stops the run like a crash: libFuzzer saves the input and prints its path.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/utf8.h"

// Stops the run when `cond` is false, printing `what` (a std::string).
#define FUZZ_CHECK(cond, what)                                                               \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "fuzz check failed: %s: %s\n", #cond, std::string(what).c_str()); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace edt::fuzz {

inline std::string_view text_of(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

}  // namespace edt::fuzz
