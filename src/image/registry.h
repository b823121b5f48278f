// Pulling images from an OCI distribution registry (Docker Hub, a site's
// own registry, NGC) into the store: a BlobSource over HTTP(S).
//
// The protocol (OCI distribution spec): the /v2/ probe, then the manifest by
// tag or digest (an index or manifest list resolves to linux/amd64 through
// import_from_index), then the config and layer blobs. Authentication: the
// challenge in a 401's WWW-Authenticate, either Bearer (a token from its
// realm, for scope repository:REPO:pull, asked with the credentials when
// there are some, anonymously otherwise) or Basic (the credentials). TLS
// always, verified against the system's CAs or a CA file. A mirror of a
// registry is asked first, anonymously (the registry's credentials never go
// to it), and the registry when the mirror fails or lacks what is asked.
//
// What is trusted: nothing the registry says. A manifest asked by digest
// must hash to it; every blob is written through Store::BlobWriter, which
// stops at the first byte past the size its descriptor declares and checks
// the digest at the end; documents are bounded before they are read; the
// sum of an image's declared blob sizes is bounded by the store's image
// bound. Blobs already in the store are not fetched again. The credentials
// go only into Authorization headers: never into a URL, a log line or an
// error message.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "edt/status.h"
#include "image/digest.h"
#include "image/store.h"

namespace edt::image {

// REGISTRY/REPOSITORY[:TAG][@sha256:HEX], as Docker reads one: the first
// name is the registry when it has a '.' or a ':' or is "localhost"; else
// the registry is Docker Hub and a one-name repository is under library/.
struct Reference {
  std::string registry;    // "nvcr.io", "127.0.0.1:5000", "docker.io"
  std::string repository;  // "nvidia/pytorch", "library/ubuntu"
  std::string tag;         // "latest" when neither tag nor digest is given
  std::optional<Digest> digest;
  // The canonical text: "registry/repository:tag" or "...@sha256:.." (with the tag, if given).
  std::string str() const;
};

Result<Reference> parse_reference(const std::string& text);

struct RegistryCredentials {
  std::string username, password;  // both empty: anonymous
  bool empty() const { return username.empty() && password.empty(); }
};

struct RegistryOptions {
  std::string ca_file;  // empty: the system's CAs
  // A registry's mirror, by the registry's name as a Reference has it
  // ("docker.io" -> "https://mirror.example:5000"); http:// is accepted for
  // a mirror, never for a registry.
  std::map<std::string, std::string> mirrors;
};

struct ImportProgress;  // image/import.h

struct PullStats {
  uint64_t fetched_blobs = 0, fetched_bytes = 0;  // fetched over the network, manifests included
  uint64_t reused_blobs = 0;                      // already in the store
};

struct PullOptions {
  std::string name;  // the image's name in the store
  RegistryCredentials credentials;
  RegistryOptions registry;
  ImportProgress* progress = nullptr;  // how far the pull has come, for others to read; may be null
};

// Pulls `ref` into `store` (under `lock`) as an image named options.name.
// Blobs fetched whole stay in the store when the pull fails later (a retry
// reuses them); a blob cut off is dropped with tmp/.
Result<ImageRecord> pull_image(Store& store, const Store::Lock& lock, const Reference& ref,
                               const PullOptions& options, PullStats* stats);

}  // namespace edt::image
