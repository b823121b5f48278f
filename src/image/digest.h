// Digests of content ("sha256:<64 hex>") and a streaming SHA-256.
//
// A Digest is parsed once, at the edge (a manifest, a file name, a flag),
// and is valid from then on: its algorithm is sha256 (the only one the OCI
// image spec requires, and the only one edt accepts) and its hex is 64
// lowercase hex digits, so that it is safe to put in a path. Sha256 hashes
// bytes as they stream past, so that a blob is verified while it is written
// and never read twice. Both are values; a Sha256 is used by one thread.
#pragma once

#include <openssl/evp.h>

#include <memory>
#include <string>
#include <string_view>

#include "edt/status.h"

namespace edt::image {

struct Digest {
  std::string hex;  // 64 lowercase hex digits

  std::string str() const { return "sha256:" + hex; }
  // The first 12 hex digits, as errors and listings name a digest.
  std::string short_str() const { return hex.substr(0, 12); }
  bool operator==(const Digest&) const = default;
  auto operator<=>(const Digest&) const = default;
};

// "sha256:<hex>" (`what` names it in the error: "manifest layers[2].digest").
Result<Digest> parse_digest(std::string_view text, const std::string& what);
// 64 hex digits alone (a file name under blobs/sha256/).
Result<Digest> parse_hex_digest(std::string_view hex, const std::string& what);

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
  // The digest of everything updated so far; the hasher is spent after it.
  Digest finish();

 private:
  struct Free {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

Digest sha256_of(std::string_view bytes);

}  // namespace edt::image
