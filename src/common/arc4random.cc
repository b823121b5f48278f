// What edt_link_portable links (cmake/EdtHelpers.cmake) needs of glibc at
// most 2.35, Ubuntu 22.04's: libstdc++'s std::random_device, linked in
// statically, calls arc4random, new in glibc 2.36. This one, over
// getrandom(2) (glibc 2.25), is the one it gets.
#include <sys/random.h>

#include <cstdint>

extern "C" uint32_t arc4random(void) noexcept {
  uint32_t value = 0;
  while (getrandom(&value, sizeof value, 0) != static_cast<ssize_t>(sizeof value)) {
  }
  return value;
}
