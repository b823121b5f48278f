// A request target's path and query as edtd's server reads them
// (control/api/request.h): %-decoding and the query's name=value pairs.
#include <cstdint>
#include <string>

#include "control/api/request.h"
#include "fuzz_check.h"

namespace {

// Every byte of `text` as %XX.
std::string encoded(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) out += {'%', kHex[c >> 4], kHex[c & 15]};
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = edt::fuzz::text_of(data, size);
  const std::string path = edt::control::percent_decoded(text);
  FUZZ_CHECK(path.size() <= text.size(), "decoding made the text longer");
  // Any bytes, escaped, decode to themselves.
  const std::string raw(text);
  FUZZ_CHECK(edt::control::percent_decoded(encoded(raw)) == raw, "an escaped text did not decode to itself");

  const auto params = edt::control::parse_query(text);
  // The pairs, written back escaped, read back the same.
  std::string again;
  for (const auto& [name, value] : params) again += (again.empty() ? "" : "&") + encoded(name) + "=" + encoded(value);
  const auto reread = edt::control::parse_query(again);
  FUZZ_CHECK(reread.size() == params.size(), "the query's pairs did not read back: " + again);
  for (auto a = params.begin(), b = reread.begin(); a != params.end(); ++a, ++b)
    FUZZ_CHECK(a->first == b->first && a->second == b->second, "a query pair read back differently: " + again);
  return 0;
}
