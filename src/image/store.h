// The content-addressed image store: blobs as received, layers unpacked
// once, image roots assembled from layers, and a record per image name.
//
// Layout under the store's root (docs/images.md):
//   blobs/sha256/<hex>           blobs (manifests, configs, compressed layers), each verified
//   layers/sha256/<diff id>/     an unpacked layer: tree/ and layer.json
//   roots/sha256/<chain id>/     an image's root, hard links into its layers (assemble.h)
//   images/<sha256 of name>.json an image: its name, manifest, config fields, layers
//   tmp/                         work in progress, emptied whenever the lock is taken
//   lock                         flock(2)ed by every change
//
// Every file or tree is made under tmp/ and renamed into place whole, after
// its content is on disk; the image record is written last. So a process
// killed at any point (kill -9) leaves only complete blobs, layers and roots
// and whole records: a retry reuses what is there, and gc() frees what no
// record names. What a record names is the reference count: it is recounted
// from the records on disk, never kept apart where it could drift.
//
// Writers: every change holds a Lock (an exclusive flock on `lock`), which
// the calls that change the store take as an argument; readers (list, get,
// has_blob) need none. A source of blobs (a directory, an archive, later a
// registry) writes each with a BlobWriter, which checks the size and digest
// it was promised while the bytes stream in, then calls commit_image().
// A Store is used by one thread at a time, but for a pull: a source may
// write blobs (begin_blob(), BlobWriter) on one thread while others unpack
// the layers already stored (prepare_layer()), so that a pull unpacks
// layers i and i+1 at once while it fetches layer i+2.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "edt/status.h"
#include "image/digest.h"
#include "image/layer.h"
#include "image/oci.h"
#include "image/safe_fs.h"

namespace edt::image {

struct StoreLimits {
  LayerLimits layer;                        // per layer; its max_bytes also bounds any one blob
  uint64_t max_image_bytes = 128ull << 30;  // unpacked bytes of all of an image's layers
  uint64_t max_document_bytes = 4 << 20;    // a manifest, index or config
  bool durable = true;                      // fsync/syncfs before each rename (off in some tests)
};

struct LayerRecord {
  Digest digest;   // the blob's
  Digest diff_id;  // the uncompressed tar's
  std::string media_type;
  uint64_t size = 0;            // of the blob
  uint64_t unpacked_bytes = 0;  // of the uncompressed tar
};

struct ImageRecord {
  std::string name;
  Digest manifest, config, chain_id;
  std::string root;  // the assembled root directory
  std::vector<LayerRecord> layers;
  ImageConfig config_fields;
  int64_t created = 0;  // seconds since the epoch, when it was stored
};

struct GcStats {
  uint64_t blobs = 0, layers = 0, roots = 0;  // removed
};

class Store {
 public:
  // An exclusive hold on the store for a change; movable, released when it goes.
  class Lock {
   public:
    Lock(Lock&&) = default;
    Lock& operator=(Lock&&) = default;

   private:
    friend class Store;
    explicit Lock(UniqueFd fd) : fd_(std::move(fd)) {}
    UniqueFd fd_;
  };

  // Writes one blob under tmp/ and, on commit(), verifies it and renames it
  // into blobs/. Dropped without commit(), it removes what it wrote.
  class BlobWriter {
   public:
    BlobWriter(BlobWriter&&) = default;
    ~BlobWriter();
    // kInvalidArgument as soon as the bytes pass the promised size or the bound.
    Status write(const void* data, size_t size);
    // The digest; an error when the size or the digest is not the promised one.
    Result<Digest> commit();

   private:
    friend class Store;
    BlobWriter() = default;
    std::string tmp_, blobs_dir_, what_;
    bool durable_ = true;
    UniqueFd fd_;
    Sha256 hash_;
    std::optional<Digest> expected_;
    std::optional<uint64_t> expected_size_;
    uint64_t bytes_ = 0, max_bytes_ = 0;
    bool done_ = false;
  };

  // Opens the store at `root`, making its folders when missing.
  static Result<Store> open(const std::string& root, StoreLimits limits = {});

  // Waits for the store's lock, then empties tmp/ (what a killed writer left).
  Result<Lock> lock();

  // `what` names the blob in errors ("layers[2] of manifest sha256:..").
  Result<BlobWriter> begin_blob(const Lock& lock, std::optional<Digest> expected,
                                std::optional<uint64_t> expected_size, const std::string& what);
  Result<Digest> put_blob(const Lock& lock, std::string_view bytes, std::optional<Digest> expected,
                          const std::string& what);
  // Copies the stream `fd` (a file of a layout, an archive's entry) into a blob.
  Result<Digest> put_blob_from_fd(const Lock& lock, int fd, std::optional<Digest> expected,
                                  std::optional<uint64_t> expected_size, const std::string& what);

  bool has_blob(const Digest& digest) const;
  std::string blob_path(const Digest& digest) const;
  // A stored manifest, index or config (bounded by max_document_bytes).
  Result<std::string> read_document(const Digest& digest, const std::string& what) const;

  // A stored manifest and its stored config, checked: an image for
  // linux/amd64 (or that names no platform), one diff ID per layer.
  struct ImagePlan {
    Digest digest;  // the manifest's
    Manifest manifest;
    ImageConfig config;
  };
  Result<ImagePlan> plan_image(const Digest& manifest) const;
  // Unpacks layer `i` of `plan` (its blob stored whole) unless the store
  // has it, checked against its diff ID, and counts its bytes into `image`
  // (an ImageBytes of limits().max_image_bytes), failing once the image's
  // layers are past the bound. What commit_image() does for each layer; a
  // pull calls it as each layer arrives, on several threads at once for
  // distinct diff IDs. Layers are unpacked once: a layer made here is what
  // commit_image() then finds, and gc() frees it when no record names it.
  Result<LayerRecord> prepare_layer(const Lock& lock, const ImagePlan& plan, size_t i, ImageBytes& image);

  // Makes `name` the image of the stored `manifest` (its config and layer
  // blobs stored too): unpacks the layers it lacks, checks each against the
  // config's diff IDs and the bounds, assembles the root, writes the record.
  // A record of the same name is replaced.
  Result<ImageRecord> commit_image(const Lock& lock, const std::string& name, const Digest& manifest);

  Result<std::vector<ImageRecord>> list() const;
  Result<ImageRecord> get(const std::string& name) const;
  // Removes the record of `name`, then frees what no other record names.
  Result<GcStats> remove(const Lock& lock, const std::string& name,
                         const std::set<std::string>& roots_in_use = {});
  // Frees the blobs, layers and roots that no record names, but the roots
  // (directories, as ImageRecord::root) that running containers use.
  Result<GcStats> gc(const Lock& lock, const std::set<std::string>& roots_in_use = {});
  // Frees only the blobs no record names (what an archive held beyond the
  // image imported): no container uses a blob.
  Result<GcStats> gc_blobs(const Lock& lock);

  const std::string& root() const { return root_; }
  const StoreLimits& limits() const { return limits_; }

 private:
  Store(std::string root, StoreLimits limits) : root_(std::move(root)), limits_(limits) {}
  std::string tmp_path(const std::string& kind) const;
  Result<LayerRecord> ensure_layer(const Descriptor& blob, const Digest& diff_id, ImageBytes& image);
  Result<std::string> ensure_root(const Digest& chain_id, const std::vector<LayerRecord>& layers);
  Status publish_dir(const std::string& tmp, const std::string& final_path);
  Result<ImageRecord> build_record(const Lock& lock, const std::string& name, const Digest& manifest);
  // Sweeps the blobs and, given `roots_in_use`, the layers and roots too.
  Result<GcStats> sweep(const std::set<std::string>* roots_in_use);

  std::string root_;
  StoreLimits limits_;
  // Shared by the threads of a pull (begin_blob, prepare_layer).
  std::shared_ptr<std::atomic<uint64_t>> tmp_counter_ = std::make_shared<std::atomic<uint64_t>>(0);
};

// Checks an image name: 1 to 255 printable characters, no space or control
// (e.g. "nvcr.io/nvidia/pytorch:24.05-py3").
Status check_image_name(const std::string& name);

}  // namespace edt::image
