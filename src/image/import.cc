#include "image/import.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/cpu.h"

namespace edt::image {
namespace {

using json = nlohmann::json;

constexpr int kMaxIndexDepth = 4;

// Blobs of an OCI layout directory: blobs/sha256/<hex>.
class LayoutDirSource : public BlobSource {
 public:
  explicit LayoutDirSource(std::string dir) : dir_(std::move(dir)) {}
  Status fetch(Store& store, const Store::Lock& lock, const Descriptor& d, const std::string& what) override {
    if (store.has_blob(d.digest)) return Status::ok();
    const std::string path = dir_ + "/blobs/sha256/" + d.digest.hex;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io_error(what + ": the layout has no blob " + d.digest.str() + " (" + path + ")", errno);
    UniqueFd owned(fd);
    return store.put_blob_from_fd(lock, fd, d.digest, d.size, what + " " + d.digest.str()).status();
  }

 private:
  std::string dir_;
};

// Blobs an archive held, already written to the store while it was read.
class StoredSource : public BlobSource {
 public:
  Status fetch(Store& store, const Store::Lock&, const Descriptor& d, const std::string& what) override {
    if (store.has_blob(d.digest)) return Status::ok();
    return Status(StatusCode::kNotFound, what + ": the archive has no blob " + d.digest.str());
  }
};

std::string default_name(const Descriptor& d) {
  for (const char* key : {"io.containerd.image.name", "org.opencontainers.image.ref.name"}) {
    auto it = d.annotations.find(key);
    if (it != d.annotations.end()) return it->second;
  }
  return "";
}

Status need_name(const std::string& name) {
  if (!name.empty()) return Status::ok();
  return Status(StatusCode::kInvalidArgument, "name", "the image names itself nowhere (no ref.name annotation, no RepoTags)",
                "give it a name: --name repo/name:tag");
}

// A manifest, index or config is read whole: its declared size is bounded
// before a byte of it is fetched.
Status check_document_size(const Store& store, const Descriptor& d, const std::string& what) {
  if (d.size <= store.limits().max_document_bytes) return Status::ok();
  return Status(StatusCode::kResourceExhausted, what + " declares " + std::to_string(d.size) +
                                                    " bytes, more than a document's bound of " +
                                                    std::to_string(store.limits().max_document_bytes));
}

// The layers fetched so far, as the fetching thread tells the unpacking ones.
struct FetchProgress {
  std::mutex mu;
  std::condition_variable cv;
  size_t fetched = 0;  // layers 0..fetched-1 are stored whole
  Status error;        // the fetch's error, at layer `fetched`
  bool failed = false;
  std::atomic<bool> stop{false};  // an unpacking failed: fetch and unpack no more

  void stop_all() {
    std::lock_guard<std::mutex> hold(mu);
    stop = true;
    cv.notify_all();
  }
};

void fetch_layers(Store& store, const Store::Lock& lock, BlobSource& source, const Store::ImagePlan& plan,
                  FetchProgress& p, ImportProgress& told) {
  const std::string what = "manifest " + plan.digest.str() + " layers[";
  for (size_t i = 0; i < plan.manifest.layers.size() && !p.stop; ++i) {
    told.bytes_streaming = 0;
    Status status = source.fetch(store, lock, plan.manifest.layers[i], what + std::to_string(i) + "]");
    if (status.is_ok()) {
      told.bytes_fetched += plan.manifest.layers[i].size;
      told.bytes_streaming = 0;
      ++told.layers_fetched;
    }
    std::lock_guard<std::mutex> hold(p.mu);
    if (status.is_ok()) {
      ++p.fetched;
    } else {
      p.error = status;
      p.failed = true;
    }
    p.cv.notify_all();
    if (!status.is_ok()) return;
  }
}

// Layers unpacked at once: each is CPU-bound (inflate, SHA-256, the
// kernel's writes), so one per core, up to 4.
size_t unpack_threads(size_t layers) {
  const size_t cores = static_cast<size_t>(cpu::usable_cores());
  return std::clamp<size_t>(std::min<size_t>(cores, 4), 1, std::max<size_t>(layers, 1));
}

// The unpacking side of a pull: threads take the layers in order, each
// once it is stored whole, and unpack them at once, counting their bytes
// into one ImageBytes. A layer whose diff ID an earlier layer has is left
// to that one (commit_image() finds it made). Errors are kept by layer, so
// the first in layer order is the one returned, whichever thread met it.
class LayerUnpacking {
 public:
  LayerUnpacking(Store& store, const Store::Lock& lock, const Store::ImagePlan& plan, FetchProgress& p,
                 ImportProgress& told)
      : store_(store), lock_(lock), plan_(plan), p_(p), told_(told), image_(store.limits().max_image_bytes),
        errors_(plan.manifest.layers.size()) {}

  Status run() {
    std::vector<std::thread> threads;
    for (size_t t = 1; t < unpack_threads(errors_.size()); ++t) threads.emplace_back([this] { work(); });
    work();
    for (std::thread& t : threads) t.join();
    for (const Status& e : errors_) {
      if (!e.is_ok()) return e;
    }
    return Status::ok();
  }

 private:
  void work() {
    for (size_t i; (i = next_++) < errors_.size();) {
      if (!wait_fetched(i)) return;
      if (!repeats_an_earlier_layer(i)) {
        auto layer = store_.prepare_layer(lock_, plan_, i, image_);
        if (!layer.is_ok()) {
          errors_[i] = layer.status();
          p_.stop_all();
          return;
        }
      }
      ++told_.layers_unpacked;
    }
  }

  // Whether layer `i` is stored whole; false when the pull stops first
  // (the fetch's error is kept at the layer it failed on).
  bool wait_fetched(size_t i) {
    std::unique_lock<std::mutex> hold(p_.mu);
    p_.cv.wait(hold, [&] { return p_.fetched > i || p_.failed || p_.stop; });
    if (p_.fetched > i && !p_.stop) return true;
    if (p_.failed) errors_[p_.fetched] = p_.error;
    return false;
  }

  bool repeats_an_earlier_layer(size_t i) const {
    const auto& ids = plan_.config.diff_ids;
    return std::find(ids.begin(), ids.begin() + i, ids[i]) != ids.begin() + i;
  }

  Store& store_;
  const Store::Lock& lock_;
  const Store::ImagePlan& plan_;
  FetchProgress& p_;
  ImportProgress& told_;
  ImageBytes image_;
  std::vector<Status> errors_;  // by layer, read after the joins; a fetch's error is written under p_.mu
  std::atomic<size_t> next_{0};
};

// Fetches the layers on a thread of their own while others unpack each
// once it is stored whole (its digest verified): the network, or the copy,
// overlaps the unpacking, which commit_image() then finds done. The first
// error wins, in layer order; after an unpacking error no further layer is
// fetched or unpacked (those under way end first).
Status fetch_and_unpack(Store& store, const Store::Lock& lock, BlobSource& source, const Store::ImagePlan& plan,
                        ImportProgress& told) {
  uint64_t bytes = 0;
  for (const Descriptor& layer : plan.manifest.layers) bytes += layer.size;
  told.bytes = bytes;
  told.layers = plan.manifest.layers.size();
  FetchProgress progress;
  std::thread fetcher([&] { fetch_layers(store, lock, source, plan, progress, told); });
  Status status = LayerUnpacking(store, lock, plan, progress, told).run();
  progress.stop_all();
  fetcher.join();
  return status;
}

}  // namespace

Result<ImageRecord> import_from_index(Store& store, const Store::Lock& lock, BlobSource& source,
                                      const std::vector<Descriptor>& index, const ImportOptions& options) {
  EDT_ASSIGN_OR_RETURN(Descriptor chosen, pick_platform(index, "index.json"));
  const std::string name = options.name.empty() ? default_name(chosen) : options.name;
  EDT_RETURN_IF_ERROR(need_name(name));
  ImportProgress untold;
  ImportProgress& told = options.progress ? *options.progress : untold;
  for (int depth = 0;; ++depth) {
    const std::string what = "manifest " + chosen.digest.str();
    EDT_RETURN_IF_ERROR(check_document_size(store, chosen, what));
    EDT_RETURN_IF_ERROR(source.fetch(store, lock, chosen, "manifest"));
    EDT_ASSIGN_OR_RETURN(std::string text, store.read_document(chosen.digest, "manifest"));
    if (!is_index(chosen.media_type, text)) {
      EDT_ASSIGN_OR_RETURN(Manifest manifest, parse_manifest(text, what));
      EDT_RETURN_IF_ERROR(check_document_size(store, manifest.config, what + " config"));
      EDT_RETURN_IF_ERROR(source.fetch(store, lock, manifest.config, what + " config"));
      EDT_ASSIGN_OR_RETURN(Store::ImagePlan plan, store.plan_image(chosen.digest));
      EDT_RETURN_IF_ERROR(fetch_and_unpack(store, lock, source, plan, told));
      return store.commit_image(lock, name, chosen.digest);
    }
    if (depth == kMaxIndexDepth) return invalid_argument(what + ": indexes nested more than 4 deep");
    EDT_ASSIGN_OR_RETURN(std::vector<Descriptor> inner, parse_index(text, "index " + chosen.digest.str()));
    EDT_ASSIGN_OR_RETURN(chosen, pick_platform(inner, "index " + chosen.digest.str()));
  }
}

namespace {

struct ArchiveFree {
  void operator()(archive* a) const { archive_read_free(a); }
};

// What one pass over an archive leaves: its files as blobs (by path), its
// symbolic links, and the documents that say what the archive is.
struct ArchiveContents {
  std::map<std::string, Descriptor> files;
  std::map<std::string, std::string> links;
  std::string index_json, manifest_json;
  bool has_index = false, has_manifest = false;
};

// "./a//b" -> "a/b"; "" for a path that climbs or is absolute.
std::string clean_path(const std::string& path) {
  auto names = split_relative(path);
  if (!names.is_ok()) return "";
  std::string out;
  for (const std::string& n : *names) out += (out.empty() ? "" : "/") + n;
  return out;
}

Descriptor blob_descriptor(const Digest& digest, uint64_t size) {
  Descriptor d;
  d.digest = digest;
  d.size = size;
  return d;
}

Result<std::string> read_entry_text(archive* a, archive_entry* e, uint64_t max_bytes, const std::string& name) {
  if (archive_entry_size(e) > static_cast<int64_t>(max_bytes)) {
    return Status(StatusCode::kResourceExhausted, name + " in the archive is over " + std::to_string(max_bytes) + " bytes");
  }
  std::string text(archive_entry_size(e), '\0');
  la_ssize_t n = archive_read_data(a, text.data(), text.size());
  if (n < 0 || static_cast<size_t>(n) != text.size()) return Status(StatusCode::kMalformed, "short read of " + name);
  return text;
}

Status store_entry(Store& store, const Store::Lock& lock, archive* a, archive_entry* e, const std::string& path,
                   ArchiveContents& out) {
  std::optional<Digest> expected;
  if (path.rfind("blobs/sha256/", 0) == 0) {
    EDT_ASSIGN_OR_RETURN(Digest d, parse_hex_digest(path.substr(13), "archive entry " + path));
    expected = d;
  }
  const uint64_t size = archive_entry_size(e);
  if (expected && store.has_blob(*expected)) {
    out.files[path] = blob_descriptor(*expected, size);
    return Status::ok();
  }
  EDT_ASSIGN_OR_RETURN(Store::BlobWriter w, store.begin_blob(lock, expected, size, "archive entry " + path));
  std::vector<char> buf(1 << 20);
  for (;;) {
    la_ssize_t n = archive_read_data(a, buf.data(), buf.size());
    if (n < 0) return Status(StatusCode::kMalformed, path + ": " + archive_error_string(a));
    if (n == 0) break;
    EDT_RETURN_IF_ERROR(w.write(buf.data(), n));
  }
  EDT_ASSIGN_OR_RETURN(Digest digest, w.commit());
  out.files[path] = blob_descriptor(digest, size);
  return Status::ok();
}

Status read_archive_entry(Store& store, const Store::Lock& lock, archive* a, archive_entry* e, ArchiveContents& out) {
  const char* raw = archive_entry_pathname(e);
  const std::string path = clean_path(raw ? raw : "");
  if (path.empty()) return Status::ok();  // the root, or a name no image format uses
  const uint64_t max_doc = store.limits().max_document_bytes;
  if (archive_entry_filetype(e) == AE_IFLNK) {
    out.links[path] = archive_entry_symlink(e) ? archive_entry_symlink(e) : "";
  } else if (archive_entry_filetype(e) != AE_IFREG) {
    return Status::ok();
  } else if (path == "index.json") {
    EDT_ASSIGN_OR_RETURN(out.index_json, read_entry_text(a, e, max_doc, path));
    out.has_index = true;
  } else if (path == "manifest.json") {
    EDT_ASSIGN_OR_RETURN(out.manifest_json, read_entry_text(a, e, max_doc, path));
    out.has_manifest = true;
  } else if (path != "oci-layout" && path != "repositories") {
    return store_entry(store, lock, a, e, path, out);
  }
  return Status::ok();
}

Result<ArchiveContents> read_archive(Store& store, const Store::Lock& lock, const std::string& path) {
  std::unique_ptr<archive, ArchiveFree> a(archive_read_new());
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK) {
    return Status(StatusCode::kMalformed, path + ": " + archive_error_string(a.get()));
  }
  ArchiveContents out;
  uint64_t total = 0;
  archive_entry* e;
  int r;
  while ((r = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
    total += archive_entry_size(e) > 0 ? archive_entry_size(e) : 0;
    if (total > store.limits().max_image_bytes) {
      return Status(StatusCode::kResourceExhausted, path + " holds more than the image bound of " +
                                                        std::to_string(store.limits().max_image_bytes) + " bytes");
    }
    EDT_RETURN_IF_ERROR(read_archive_entry(store, lock, a.get(), e, out).with_context(path));
  }
  if (r != ARCHIVE_EOF) {
    return Status(StatusCode::kMalformed, path + " is not a tar (plain, gzip or zstd): " + archive_error_string(a.get()));
  }
  return out;
}

// The blob an archive's path names, following the symbolic links an older
// `docker save` writes for a layer it holds twice.
Result<Descriptor> archive_file(const ArchiveContents& c, std::string path, const std::string& what) {
  for (int hops = 0; hops < 8; ++hops) {
    path = clean_path(path);
    if (auto f = c.files.find(path); f != c.files.end()) return f->second;
    auto link = c.links.find(path);
    if (link == c.links.end()) break;
    const std::string dir = std::filesystem::path(path).parent_path().string();
    // Lexically, inside the archive: "a/../b/layer.tar" is "b/layer.tar".
    path = std::filesystem::path((dir.empty() ? "" : dir + "/") + link->second).lexically_normal().string();
  }
  return Status(StatusCode::kNotFound, what + ": the archive has no file '" + path + "'");
}

json array_at(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_array() ? *it : json::array();
}

std::string string_at(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

Result<json> pick_docker_entry(const std::string& text, const std::string& name) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_array() || doc.empty()) {
    return Status(StatusCode::kMalformed, "manifest.json is not a non-empty JSON array");
  }
  std::string tags;
  for (const json& entry : doc) {
    if (!entry.is_object()) return Status(StatusCode::kMalformed, "manifest.json has an entry that is no object");
    for (const json& t : array_at(entry, "RepoTags")) {
      if (t.is_string() && t.get<std::string>() == name) return entry;
      if (t.is_string()) tags += (tags.empty() ? "" : ", ") + t.get<std::string>();
    }
  }
  if (doc.size() == 1) return doc[0];
  return Status(StatusCode::kInvalidArgument, "name", "the archive holds " + std::to_string(doc.size()) +
                                                          " images (" + tags + ")",
                "choose one with --name and one of its tags");
}

Result<ImageRecord> import_docker(Store& store, const Store::Lock& lock, const ArchiveContents& c,
                                  const ImportOptions& options) {
  EDT_ASSIGN_OR_RETURN(json entry, pick_docker_entry(c.manifest_json, options.name));
  std::string name = options.name;
  const json tags = array_at(entry, "RepoTags");
  if (name.empty() && !tags.empty() && tags[0].is_string()) name = tags[0].get<std::string>();
  EDT_RETURN_IF_ERROR(need_name(name));
  EDT_ASSIGN_OR_RETURN(Descriptor config, archive_file(c, string_at(entry, "Config"), "manifest.json Config"));
  config.media_type = kOciConfig;
  std::vector<Descriptor> layers;
  const json list = array_at(entry, "Layers");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = "manifest.json Layers[" + std::to_string(i) + "]";
    EDT_ASSIGN_OR_RETURN(Descriptor layer, archive_file(c, list[i].is_string() ? list[i].get<std::string>() : "", at));
    layer.media_type = kOciLayerTar;  // the unpacker tells gzip and zstd from the bytes
    layers.push_back(layer);
  }
  EDT_ASSIGN_OR_RETURN(Digest manifest, store.put_blob(lock, make_manifest(config, layers), std::nullopt, "manifest"));
  return store.commit_image(lock, name, manifest);
}

Result<ImageRecord> import_archive(Store& store, const Store::Lock& lock, const std::string& path,
                                   const ImportOptions& options) {
  EDT_ASSIGN_OR_RETURN(ArchiveContents contents, read_archive(store, lock, path));
  if (contents.has_index) {
    EDT_ASSIGN_OR_RETURN(std::vector<Descriptor> index, parse_index(contents.index_json, path + " index.json"));
    StoredSource source;
    return import_from_index(store, lock, source, index, options);
  }
  if (contents.has_manifest) return import_docker(store, lock, contents, options);
  return Status(StatusCode::kInvalidArgument, path + " is neither an OCI layout (no index.json) nor a docker save "
                                                     "archive (no manifest.json)");
}

Result<ImageRecord> import_layout_dir(Store& store, const Store::Lock& lock, const std::string& dir,
                                      const ImportOptions& options) {
  auto text = read_bounded(dir + "/index.json", store.limits().max_document_bytes);
  if (!text.is_ok()) {
    return Status(StatusCode::kInvalidArgument, dir + " is no OCI layout: " + text.status().message());
  }
  EDT_ASSIGN_OR_RETURN(std::vector<Descriptor> index, parse_index(*text, dir + "/index.json"));
  LayoutDirSource source(dir);
  return import_from_index(store, lock, source, index, options);
}

}  // namespace

Result<ImageRecord> import_path(Store& store, const std::string& path, const ImportOptions& options) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return io_error("import " + path, errno);
  EDT_ASSIGN_OR_RETURN(Store::Lock lock, store.lock());
  auto record = S_ISDIR(st.st_mode) ? import_layout_dir(store, lock, path, options)
                                    : import_archive(store, lock, path, options);
  // An archive's blobs of other platforms or images, or of a failed import.
  auto freed = store.gc_blobs(lock);
  if (record.is_ok() && !freed.is_ok()) return freed.status();
  return record;
}

}  // namespace edt::image
