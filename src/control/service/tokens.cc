#include "control/service/tokens.h"

#include <openssl/rand.h>
#include <openssl/sha.h>

#include "edt/status.h"

namespace edt::control {
namespace {

std::string hex(const unsigned char* bytes, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 15];
  }
  return out;
}

}  // namespace

std::string hash_token(const std::string& token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return hex(digest, sizeof(digest));
}

std::string new_token() {
  unsigned char bytes[32];
  EDT_CHECK(RAND_bytes(bytes, sizeof(bytes)) == 1);
  return "edt_" + hex(bytes, sizeof(bytes));
}

}  // namespace edt::control
