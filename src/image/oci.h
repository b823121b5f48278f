// The OCI image documents the store reads (index, manifest, config) and
// Docker's equivalents, parsed into the few fields edt uses.
//
// Accepted: OCI image indexes and Docker manifest lists (resolved to
// linux/amd64), OCI and Docker v2 schema 2 manifests, and layers whose media
// type is a tar, plain, gzip or zstd (OCI's and Docker's names, the
// "nondistributable" ones included). Anything else (schema 1, encrypted
// layers) is an error naming the field. Pure functions of their input.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "edt/status.h"
#include "image/digest.h"

namespace edt::image {

struct Descriptor {
  std::string media_type;
  Digest digest;
  uint64_t size = 0;
  std::string os, architecture;                  // of an index's entry; empty when it names none
  std::map<std::string, std::string> annotations;
};

struct Manifest {
  Descriptor config;
  std::vector<Descriptor> layers;
};

// What a container takes from the image's config.
struct ImageConfig {
  std::vector<std::string> env;  // "NAME=value"
  std::string working_dir;
  std::string user;
  std::vector<std::string> entrypoint, cmd;
  std::map<std::string, std::string> labels;
  std::vector<Digest> diff_ids;  // rootfs.diff_ids: one per layer, of the uncompressed tar
  std::string os, architecture;
};

// Whether a document (by its media type, or its own "mediaType"/keys when
// the type is empty) is an index rather than a manifest.
bool is_index(const std::string& media_type, const std::string& json);

Result<std::vector<Descriptor>> parse_index(const std::string& json, const std::string& what);
Result<Manifest> parse_manifest(const std::string& json, const std::string& what);
Result<ImageConfig> parse_config(const std::string& json, const std::string& what);

// The entry of `index` for linux/amd64, or the only entry when it names no
// platform; an error listing the platforms there are otherwise.
Result<Descriptor> pick_platform(const std::vector<Descriptor>& index, const std::string& what);

// A manifest document (OCI) for a config and layers: what an import from a
// `docker save` archive, which has none, stores.
std::string make_manifest(const Descriptor& config, const std::vector<Descriptor>& layers);

// Media types.
inline constexpr char kOciManifest[] = "application/vnd.oci.image.manifest.v1+json";
inline constexpr char kOciConfig[] = "application/vnd.oci.image.config.v1+json";
inline constexpr char kOciLayerTar[] = "application/vnd.oci.image.layer.v1.tar";

}  // namespace edt::image
