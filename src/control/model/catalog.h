// What clusters are made of and checked against: users, images, volumes,
// the GPU inventory, and the Catalog, a snapshot of the images, volumes and
// GPUs a spec is checked against (read by the service in the transaction
// that uses it), with their JSON forms.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/model/cluster.h"
#include "control/model/error.h"

namespace edt::control {

struct User {
  std::string name;
  bool admin = false;
  std::string team = "";  // none (teams.h); the initializer lets {name, admin} stand
};

// An API token as listed: what it is for and when it ends, never the token
// itself (edtd keeps only its hash, tokens.h).
struct TokenInfo {
  int64_t id = 0;
  std::string user;
  std::string description;
  int64_t created_at = 0;  // unix seconds; 0 for a token made before edtd kept it
  int64_t expires_at = 0;  // unix seconds; 0: never
  bool expired(int64_t now) const { return expires_at != 0 && expires_at <= now; }
};

struct Image {
  std::string name;
  std::string root;  // "/" for the host's file system
  std::vector<std::string> frameworks;
  bool builtin = false;
  // An image imported into edtd's image store (docs/images.md): where it
  // came from, its manifest's digest, its unpacked bytes, and the fields of
  // its config that a container takes. Empty for the built-in image and a
  // registered root. (The initializers let {name, root, frameworks, builtin} stand.)
  std::string source = "";
  std::string digest = "";
  uint64_t size_bytes = 0;
  std::vector<std::string> env = {};  // "KEY=VALUE", as the config lists them
  std::string working_dir = "";
  std::string user = "";
  std::map<std::string, std::string> labels = {};
  bool carries(const std::string& framework) const;
  bool stored() const { return !digest.empty(); }
};

// POST /images/import: a source on edtd's host, the image's name, and its
// frameworks (empty: the label org.edt.frameworks, else horovod).
struct ImageImport {
  std::string name;
  std::string path;
  std::vector<std::string> frameworks;
};

// POST /images/pull: a registry's reference, the image's name (empty: made
// from the reference), the registry's credentials (used for this pull only,
// never stored or logged) and the frameworks, as an import's.
struct ImagePull {
  std::string name;
  std::string reference;
  std::string username, password;
  std::vector<std::string> frameworks;
};

// What a pull made, and what it fetched from the registry.
struct PulledImage {
  Image image;
  uint64_t fetched_blobs = 0, fetched_bytes = 0, reused_blobs = 0;
};

// A pull under way, as GET /images/pulls shows it: its phase ("waiting",
// "resolving", "fetching", "unpacking") and its layers' and bytes' progress.
struct ImagePullState {
  std::string name, reference;
  int64_t started_at = 0;
  std::string phase;
  uint64_t layers = 0, layers_fetched = 0, layers_unpacked = 0;
  uint64_t bytes = 0, bytes_fetched = 0;
};

struct Volume {
  std::string name;
  std::string owner;
  std::string host_path;
  bool managed = true;  // a directory edtd made under its data dir (removed with the volume)
};

struct Gpu {
  int index = 0;
  std::string model;
  bool simulated = false;
  std::string holder;  // container that holds it; empty when free or not shown
  bool held = false;   // held by a container, shown or not
};

// What a spec is checked against: images, the volumes it may mount, and the
// GPUs free per model.
struct Catalog {
  std::map<std::string, Image> images;
  std::map<std::string, Volume> volumes;
  std::map<std::string, int> gpus_free;   // model -> free devices
  std::map<std::string, int> gpus_total;  // model -> all devices
  // user -> the number of its subordinate uid/gid range (from 1; see
  // SandboxSpec::id_range)
  std::map<std::string, int64_t> user_ranges;
};

// Checks a parsed spec against what exists: the image and whether it
// carries the framework, the volumes, the GPU model, and that the machine
// has enough of them at all for spec.containers (or `new_containers`, if
// more). Whether enough are free now is gpu_shortage()'s: a request that
// waits for GPUs is queued, not refused.
Status check_against_catalog(const ClusterSpec& spec, const Catalog& catalog, int new_containers);

// Why `new_containers` more containers of `spec` cannot have their GPUs
// now ("... need 4 GPUs; 2 are free"), or "" when they can.
std::string gpu_shortage(const ClusterSpec& spec, const Catalog& catalog, int new_containers);

nlohmann::json user_to_json(const User& user);
// With "expired" as of `now` (unix seconds).
nlohmann::json token_info_to_json(const TokenInfo& token, int64_t now);
nlohmann::json image_to_json(const Image& image);
// The stored fields of an imported image (source .. labels) as the
// database keeps them, both ways; a malformed text leaves them empty.
std::string image_config_text(const Image& image);
void read_image_config(const std::string& text, Image* image);

// The environment a container of `image` starts from: `base` (edt's PATH
// and PYTHONPATH), then the image's Env over it, but PATH, which is edt's
// own directories (its tools, its environment), then the image's PATH, and
// PYTHONPATH, edt's then the image's. container_env() puts edt's own variables
// over this (EDT_*, the GPUs', the framework's), and the spec's env over all.
std::map<std::string, std::string> image_base_env(const Image& image,
                                                  const std::map<std::string, std::string>& base);
nlohmann::json volume_to_json(const Volume& volume);
nlohmann::json gpu_to_json(const Gpu& gpu);

}  // namespace edt::control
