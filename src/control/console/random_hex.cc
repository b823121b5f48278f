#include "control/console/random_hex.h"

#include <openssl/rand.h>

#include <vector>

#include "edt/status.h"

namespace edt::control {

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  EDT_CHECK_MSG(RAND_bytes(raw.data(), static_cast<int>(raw.size())) == 1, "OpenSSL has no random bytes to give");
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : raw) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  return hex;
}

}  // namespace edt::control
