#include "image/digest.h"

#include <cstdio>

namespace edt::image {

Result<Digest> parse_hex_digest(std::string_view hex, const std::string& what) {
  bool ok = hex.size() == 64;
  for (char c : hex) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!ok) {
    return Status(StatusCode::kInvalidArgument, what,
                  what + ": '" + std::string(hex.substr(0, 80)) + "' is not 64 lowercase hex digits of a sha256",
                  "give a digest as sha256:<64 hex digits>");
  }
  return Digest{std::string(hex)};
}

Result<Digest> parse_digest(std::string_view text, const std::string& what) {
  constexpr std::string_view kPrefix = "sha256:";
  if (text.substr(0, kPrefix.size()) != kPrefix) {
    return Status(StatusCode::kInvalidArgument, what,
                  what + ": digest '" + std::string(text.substr(0, 80)) + "' is not sha256:<hex>",
                  "edt accepts sha256 digests only (the OCI image spec's required algorithm)");
  }
  return parse_hex_digest(text.substr(kPrefix.size()), what);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EDT_CHECK(ctx_ != nullptr);
  EDT_CHECK(EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1);
}

void Sha256::update(const void* data, size_t size) {
  EDT_CHECK(EVP_DigestUpdate(ctx_.get(), data, size) == 1);
}

Digest Sha256::finish() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EDT_CHECK(EVP_DigestFinal_ex(ctx_.get(), md, &size) == 1 && size == 32);
  std::string hex(64, '0');
  for (unsigned i = 0; i < size; ++i) std::snprintf(&hex[2 * i], 3, "%02x", md[i]);
  return Digest{hex};
}

Digest sha256_of(std::string_view bytes) {
  Sha256 hash;
  hash.update(bytes);
  return hash.finish();
}

}  // namespace edt::image
