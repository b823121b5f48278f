// The rendezvous protocol's messages (elastic/membership.h): a generation's
// members value as a worker reads it from the store, which any process
// that reaches the store may have written.
#include <cstdint>

#include "elastic/membership.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(edt::fuzz::text_of(data, size));
  auto gen = edt::elastic::Generation::decode(7, text);
  if (!gen.is_ok()) {
    FUZZ_CHECK(!gen.status().message().empty(), "a refusal that says nothing");
    return 0;
  }
  FUZZ_CHECK(gen->number == 7, "the number changed");
  for (size_t i = 0; i < gen->members.size(); ++i) {
    const auto& m = gen->members[i];
    FUZZ_CHECK(m.id.find_first_of(" \n") == std::string::npos, "member id '" + m.id + "' has a separator");
    FUZZ_CHECK(!m.id.empty() && !m.host.empty(), "a member without an id or a host");
    FUZZ_CHECK(gen->rank_of(m.id) == static_cast<int>(i), "member '" + m.id + "' does not have rank " + std::to_string(i));
  }
  // A generation the coordinator would publish reads back as itself.
  auto again = edt::elastic::Generation::decode(7, gen->encode());
  FUZZ_CHECK(again.is_ok() && again->members == gen->members && again->failure == gen->failure,
             "'" + gen->encode() + "' does not read back");
  return 0;
}
