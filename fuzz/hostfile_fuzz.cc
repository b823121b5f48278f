// Hostfiles and -H lists (launcher/hostfile.h): text a user wrote. A host
// discovery script's output goes through parse_hostfile too.
#include <cstdint>
#include <set>

#include "fuzz_check.h"
#include "launcher/hostfile.h"

namespace {

using edt::launcher::HostSlots;

// What edtrun hands on to ssh and to workers' environments: a host of the
// characters a name or an address has, each once, with 1 or more slots; and
// its -H form reads back as the same list.
void check_hosts(const std::vector<HostSlots>& hosts, std::string_view input) {
  FUZZ_CHECK(!hosts.empty(), "an empty host list parsed");
  std::set<std::string> seen;
  for (const auto& h : hosts) {
    FUZZ_CHECK(!h.host.empty() && h.slots >= 1, "host '" + h.host + "' from '" + std::string(input) + "'");
    FUZZ_CHECK(h.host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:") ==
                   std::string::npos,
               "host '" + h.host + "' has a character no host name or address has");
    FUZZ_CHECK(seen.insert(h.host).second, "host '" + h.host + "' listed twice");
  }
  const std::string list = edt::launcher::format_host_list(hosts);
  auto again = edt::launcher::parse_host_list(list);
  FUZZ_CHECK(again.is_ok() && *again == hosts, "'" + list + "' does not read back: " +
                                                   (again.is_ok() ? std::string("other hosts") : again.status().message()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = edt::fuzz::text_of(data, size);
  if (auto hosts = edt::launcher::parse_hostfile(text, "hosts.txt"); hosts.is_ok()) check_hosts(*hosts, text);
  if (auto hosts = edt::launcher::parse_host_list(text); hosts.is_ok()) check_hosts(*hosts, text);
  return 0;
}
