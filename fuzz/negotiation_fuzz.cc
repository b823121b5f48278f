// Negotiation messages (engine/negotiation.h): what every rank's engine
// announces each cycle and every rank decodes, in rank order. A peer is
// another process of the job; what it sends is still bytes off a socket.
//
// Input: a byte that sets the number of ranks (1 to 4), then messages, each
// a little-endian u16 length and its bytes; every `ranks` messages make one
// cycle, decoded as the engine decodes it.
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/negotiation.h"
#include "fuzz_check.h"

namespace {

using edt::engine::CycleOutcome;

// Splits `rest` into its next message; false when none is left whole.
bool next_message(std::string_view* rest, std::string_view* message) {
  if (rest->size() < 2) return false;
  uint16_t n;
  std::memcpy(&n, rest->data(), 2);
  if (rest->size() - 2 < n) return false;
  *message = rest->substr(2, n);
  rest->remove_prefix(2 + size_t{n});
  return true;
}

void check_outcome(const CycleOutcome& out, int ranks) {
  for (const auto& ready : out.ready) {
    FUZZ_CHECK(static_cast<int>(ready.metas.size()) == ranks, "a ready name with the wrong number of ranks");
    bool any = false;
    for (const auto& m : ready.metas) any = any || m.has_value();
    FUZZ_CHECK(any, "ready name '" + ready.name + "' without any announcement");
    (void)ready.first();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int ranks = 1 + (data[0] & 3);
  std::string_view rest = edt::fuzz::text_of(data + 1, size - 1);
  edt::engine::Negotiator negotiator(ranks, 8);
  std::vector<std::string_view> cycle(ranks);
  for (;;) {
    for (auto& message : cycle)
      if (!next_message(&rest, &message)) return 0;
    auto out = negotiator.decode(cycle);
    if (!out.is_ok()) {
      FUZZ_CHECK(!out.status().message().empty(), "a refusal that says nothing");
      return 0;
    }
    check_outcome(*out, ranks);
  }
}
