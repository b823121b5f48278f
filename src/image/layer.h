// Unpacking one layer blob (a tar, plain, gzip or zstd) into a directory,
// with every entry checked first: the layer is hostile until checked.
//
// Refused, each with an error that names the layer's digest and the entry:
// absolute paths and "..", a path through a symbolic link (even one the same
// layer made), a relative symbolic link whose target climbs above the root,
// a hard link to anything not already in the layer, device nodes and
// sockets, more bytes (of the uncompressed stream, or of files' declared
// sizes) or more entries than the bounds allow, and setuid/setgid files
// when the policy says refuse (by default the bits are dropped: containers
// run with no_new_privs, where they would do nothing, and most distribution
// images have such files). Absolute symbolic links are kept: inside a
// container they resolve in the image's root, and nothing here follows one.
//
// Whiteouts (".wh.NAME", ".wh..wh..opq") are kept in the tree as empty
// files; assemble_root() applies them. The diff ID (the sha256 of the
// uncompressed tar) is computed in the same pass. On error the destination
// holds a partial tree: the caller unpacks into a scratch directory and
// removes it. Thread-safe on distinct destinations.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "edt/status.h"
#include "image/digest.h"

namespace edt::image {

enum class SetidPolicy { kStrip, kRefuse };

// The unpacked bytes of one image, counted across its layers as their
// streams are read, by however many threads unpack them at once: the image
// bound holds with any number of layers in flight.
class ImageBytes {
 public:
  explicit ImageBytes(uint64_t bound) : bound_(bound) {}
  // Adds `n`; false once the total is past the bound.
  bool add(uint64_t n) { return used_.fetch_add(n) + n <= bound_; }
  uint64_t left() const {
    const uint64_t used = used_.load();
    return used < bound_ ? bound_ - used : 0;
  }
  bool over() const { return used_.load() > bound_; }
  uint64_t bound() const { return bound_; }

 private:
  std::atomic<uint64_t> used_{0};
  const uint64_t bound_;
};

struct LayerLimits {
  uint64_t max_bytes = 32ull << 30;    // unpacked bytes of one layer
  uint64_t max_entries = 1'000'000;    // entries of one layer
  ImageBytes* image = nullptr;         // the image this layer is part of, if bounded
  SetidPolicy setid = SetidPolicy::kStrip;
};

struct LayerStats {
  Digest diff_id;               // sha256 of the uncompressed tar stream
  uint64_t bytes = 0;           // uncompressed stream bytes
  uint64_t entries = 0;
  uint64_t setid_stripped = 0;  // files whose setuid/setgid bits were dropped
};

// Unpacks the blob at `blob_path` (named `blob` in errors) into the empty
// directory `dest_fd`.
Result<LayerStats> unpack_layer(const std::string& blob_path, const Digest& blob, int dest_fd,
                                const LayerLimits& limits);

}  // namespace edt::image
