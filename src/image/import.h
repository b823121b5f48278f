// Bringing images into the store: from an OCI image layout (a directory or
// a tar of one) and from a `docker save` / `podman save` archive.
//
// Every source is a BlobSource: it puts a blob the import asks for into the
// store, verified against the digest and size of its descriptor. The
// import resolves the image from an index (indexes and manifest lists to
// linux/amd64, nested ones too), fetches the config, checks it, then
// fetches the layers through the source on a thread of its own while
// others unpack the ones already stored, several at once
// (Store::prepare_layer()), and calls
// Store::commit_image(). A registry puller is one more
// BlobSource. Archives are read in one pass: each file in them is written as
// a blob as it streams past (an archive need not be seekable, and may be
// gzip or zstd compressed), and the blobs the image does not use are freed
// at the end. Each import holds the store's lock.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "edt/status.h"
#include "image/oci.h"
#include "image/store.h"

namespace edt::image {

class BlobSource {
 public:
  virtual ~BlobSource() = default;
  // Puts the blob of `d` into the store unless it is there; `what` names it.
  // Called one at a time, but the layers' calls on another thread than the
  // manifest's and the config's.
  virtual Status fetch(Store& store, const Store::Lock& lock, const Descriptor& d, const std::string& what) = 0;
};

// How far an import or a pull has come, written by its threads and read by
// any other while it runs. Layers and bytes are 0 until the image's
// manifest is resolved; the layers the store had count as fetched at once.
struct ImportProgress {
  std::atomic<uint64_t> layers{0}, layers_fetched{0}, layers_unpacked{0};
  std::atomic<uint64_t> bytes{0};          // the layers' declared (compressed) bytes
  std::atomic<uint64_t> bytes_fetched{0};  // of the layers stored whole
  std::atomic<uint64_t> bytes_streaming{0};  // of the layer under way: a source adds as bytes arrive

  // Bytes stored so far, the layer under way's included (at most `bytes`).
  uint64_t bytes_so_far() const { return std::min(bytes_fetched.load() + bytes_streaming.load(), bytes.load()); }
};

struct ImportOptions {
  std::string name;  // the image's name; empty: the name the source gives it
  ImportProgress* progress = nullptr;  // where to tell how far it has come; may be null
};

// Resolves `index` (the entries of an index.json) to linux/amd64, fetches
// what the image needs from `source`, and stores it as an image.
Result<ImageRecord> import_from_index(Store& store, const Store::Lock& lock, BlobSource& source,
                                      const std::vector<Descriptor>& index, const ImportOptions& options);

// An OCI layout directory, an OCI layout tar, or a docker save tar (each tar
// plain, gzip or zstd): which one is told from its content.
Result<ImageRecord> import_path(Store& store, const std::string& path, const ImportOptions& options);

}  // namespace edt::image
