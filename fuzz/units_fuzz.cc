// Sizes and durations (common/units.h), as flags and API fields give them.
#include <cstdint>

#include "common/units.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = edt::fuzz::text_of(data, size);

  auto bytes = edt::parse_size(text);
  if (bytes.is_ok()) {
    (void)edt::format_size(*bytes);
    // A plain count of bytes reads as itself.
    if (!text.empty() && text.size() <= 15 && text.find_first_not_of("0123456789") == std::string_view::npos)
      FUZZ_CHECK(*bytes == std::stoull(std::string(text)), "parse_size('" + std::string(text) + "')");
  } else {
    FUZZ_CHECK(!bytes.status().message().empty(), "parse_size's error says nothing");
  }

  auto duration = edt::parse_duration(text);
  if (duration.is_ok()) {
    FUZZ_CHECK(duration->count() >= 0, "parse_duration('" + std::string(text) + "') is " +
                                           std::to_string(duration->count()) + " ms");
  } else {
    FUZZ_CHECK(!duration.status().message().empty(), "parse_duration's error says nothing");
  }
  return 0;
}
