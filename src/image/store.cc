#include "image/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "image/assemble.h"
#include "image/record.h"

namespace edt::image {
namespace {

namespace fs = std::filesystem;

Status write_fd(int fd, const void* data, size_t size, const std::string& what) {
  for (size_t done = 0; done < size;) {
    ssize_t n = ::write(fd, static_cast<const char*>(data) + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("write " + what, errno);
    done += n;
  }
  return Status::ok();
}

// Removes a whole path (a scratch tree) without following links in it.
Status remove_path(const std::string& path) {
  fs::path p(path);
  EDT_ASSIGN_OR_RETURN(UniqueFd parent, open_dir(p.parent_path().string()));
  return remove_at(parent.get(), p.filename().string());
}

Result<std::vector<std::string>> names_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  if (ec) return Status(StatusCode::kIoError, "list " + dir + ": " + ec.message());
  return names;
}

// OCI's chain ID: the diff ID of the first layer, then sha256("<chain> <diff id>").
Digest chain_id_of(const std::vector<LayerRecord>& layers) {
  Digest chain = layers.empty() ? sha256_of("") : layers[0].diff_id;
  for (size_t i = 1; i < layers.size(); ++i) chain = sha256_of(chain.str() + " " + layers[i].diff_id.str());
  return chain;
}

Status check_blob_size(const std::string& path, const Descriptor& d, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Status(StatusCode::kNotFound, what + " " + d.digest.str() + " is not in the store");
  }
  if (static_cast<uint64_t>(st.st_size) != d.size) {
    return invalid_argument(what + " " + d.digest.str() + ": the manifest says " + std::to_string(d.size) +
                            " bytes, the blob has " + std::to_string(st.st_size));
  }
  return Status::ok();
}

}  // namespace

Status check_image_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 255;
  for (unsigned char c : name) ok = ok && c > ' ' && c < 0x7f;
  if (ok) return Status::ok();
  return Status(StatusCode::kInvalidArgument, "name", "image name '" + name.substr(0, 80) + "' is not 1 to 255 "
                "printable characters without spaces", "name it as a registry does: repo/name:tag");
}

Result<Store> Store::open(const std::string& root, StoreLimits limits) {
  std::error_code ec;
  const std::string abs = fs::absolute(root, ec).lexically_normal().string();
  if (ec) return Status(StatusCode::kIoError, "store " + root + ": " + ec.message());
  for (const char* sub : {"blobs/sha256", "layers/sha256", "roots/sha256", "images", "tmp"}) {
    EDT_RETURN_IF_ERROR(make_dirs(abs + "/" + sub));
  }
  // A container's unprivileged ids (a user namespace's, on a Slurm node
  // too) pass through to the roots whatever the umask made: x for all
  // added, nothing taken away.
  for (const std::string& dir : {abs, abs + "/roots", abs + "/roots/sha256"}) {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return io_error("stat " + dir, errno);
    if ((st.st_mode & 0111) != 0111 && ::chmod(dir.c_str(), (st.st_mode & 07777) | 0111) != 0)
      return io_error("chmod " + dir, errno);
  }
  return Store(abs.size() > 1 && abs.back() == '/' ? abs.substr(0, abs.size() - 1) : abs, limits);
}

Result<Store::Lock> Store::lock() {
  const std::string path = root_ + "/lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("open " + path, errno);
  UniqueFd owned(fd);
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) return io_error("flock " + path, errno);
  }
  // Whoever held the lock before is done or dead: what is in tmp/ is garbage.
  EDT_ASSIGN_OR_RETURN(UniqueFd tmp, open_dir(root_ + "/tmp"));
  EDT_ASSIGN_OR_RETURN(std::vector<std::string> stale, names_in(root_ + "/tmp"));
  for (const std::string& name : stale) EDT_RETURN_IF_ERROR(remove_at(tmp.get(), name));
  return Lock(std::move(owned));
}

std::string Store::tmp_path(const std::string& kind) const {
  return root_ + "/tmp/" + kind + "-" + std::to_string(::getpid()) + "-" + std::to_string(++*tmp_counter_);
}

std::string Store::blob_path(const Digest& digest) const { return root_ + "/blobs/sha256/" + digest.hex; }

bool Store::has_blob(const Digest& digest) const { return ::access(blob_path(digest).c_str(), F_OK) == 0; }

Result<std::string> Store::read_document(const Digest& digest, const std::string& what) const {
  if (!has_blob(digest)) return Status(StatusCode::kNotFound, what + " " + digest.str() + " is not in the store");
  auto text = read_bounded(blob_path(digest), limits_.max_document_bytes);
  if (!text.is_ok()) return text.status().with_context(what);
  return text;
}

Result<Store::BlobWriter> Store::begin_blob(const Lock&, std::optional<Digest> expected,
                                            std::optional<uint64_t> expected_size, const std::string& what) {
  const uint64_t bound = limits_.layer.max_bytes;
  if (expected_size && *expected_size > bound) {
    return Status(StatusCode::kResourceExhausted, what + " declares " + std::to_string(*expected_size) +
                                                      " bytes, more than the store's bound of " + std::to_string(bound));
  }
  BlobWriter w;
  w.tmp_ = tmp_path("blob");
  w.blobs_dir_ = root_ + "/blobs/sha256/";
  w.what_ = what;
  w.durable_ = limits_.durable;
  w.expected_ = expected;
  w.expected_size_ = expected_size;
  w.max_bytes_ = expected_size ? *expected_size : bound;
  int fd = ::open(w.tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("create " + w.tmp_, errno);
  w.fd_ = UniqueFd(fd);
  return w;
}

Store::BlobWriter::~BlobWriter() {
  if (!done_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

Status Store::BlobWriter::write(const void* data, size_t size) {
  if (bytes_ + size > max_bytes_) {
    if (expected_size_) {
      return invalid_argument(what_ + " is longer than the " + std::to_string(*expected_size_) +
                              " bytes its descriptor declares");
    }
    return Status(StatusCode::kResourceExhausted, what_ + " is over the bound of " + std::to_string(max_bytes_) + " bytes");
  }
  hash_.update(data, size);
  bytes_ += size;
  return write_fd(fd_.get(), data, size, tmp_);
}

Result<Digest> Store::BlobWriter::commit() {
  if (expected_size_ && bytes_ != *expected_size_) {
    return invalid_argument(what_ + " has " + std::to_string(bytes_) + " bytes, shorter than the " +
                            std::to_string(*expected_size_) + " its descriptor declares");
  }
  Digest digest = hash_.finish();
  if (expected_ && digest != *expected_) {
    return invalid_argument(what_ + ": its content's digest is " + digest.str() + ", not the " + expected_->str() +
                            " it was named by");
  }
  if (durable_ && ::fsync(fd_.get()) != 0) return io_error("fsync " + tmp_, errno);
  ::fchmod(fd_.get(), 0444);
  const std::string final_path = blobs_dir_ + digest.hex;
  if (::rename(tmp_.c_str(), final_path.c_str()) != 0) return io_error("rename to " + final_path, errno);
  done_ = true;
  return digest;
}

Result<Digest> Store::put_blob(const Lock& lock, std::string_view bytes, std::optional<Digest> expected,
                               const std::string& what) {
  EDT_ASSIGN_OR_RETURN(BlobWriter w, begin_blob(lock, expected, bytes.size(), what));
  EDT_RETURN_IF_ERROR(w.write(bytes.data(), bytes.size()));
  return w.commit();
}

Result<Digest> Store::put_blob_from_fd(const Lock& lock, int fd, std::optional<Digest> expected,
                                       std::optional<uint64_t> expected_size, const std::string& what) {
  EDT_ASSIGN_OR_RETURN(BlobWriter w, begin_blob(lock, expected, expected_size, what));
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("read " + what, errno);
    if (n == 0) return w.commit();
    EDT_RETURN_IF_ERROR(w.write(buf.data(), n));
  }
}

Status Store::publish_dir(const std::string& tmp, const std::string& final_path) {
  if (limits_.durable) {
    EDT_ASSIGN_OR_RETURN(UniqueFd dir, open_dir(tmp));
    EDT_RETURN_IF_ERROR(sync_fs(dir.get(), tmp));
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) return io_error("rename to " + final_path, errno);
  return Status::ok();
}

Result<LayerRecord> Store::ensure_layer(const Descriptor& blob, const Digest& diff_id, ImageBytes& image) {
  LayerRecord record{blob.digest, diff_id, blob.media_type, blob.size, 0};
  const std::string final_path = root_ + "/layers/sha256/" + diff_id.hex;
  if (auto info = read_bounded(final_path + "/layer.json", 4096); info.is_ok()) {
    auto doc = nlohmann::json::parse(*info, nullptr, false);
    auto bytes = doc.is_object() ? doc.find("unpacked_bytes") : doc.end();
    if (bytes != doc.end() && bytes->is_number_unsigned()) {
      record.unpacked_bytes = bytes->get<uint64_t>();
      image.add(record.unpacked_bytes);
      return record;
    }
    // Not a layer.json this store wrote: unpack the layer again.
    EDT_RETURN_IF_ERROR(remove_path(final_path));
  }
  const std::string tmp = tmp_path("layer");
  EDT_RETURN_IF_ERROR(make_dirs(tmp + "/tree"));
  LayerLimits limits = limits_.layer;
  limits.image = &image;
  auto unpacked = [&]() -> Result<LayerStats> {
    EDT_ASSIGN_OR_RETURN(UniqueFd tree, open_dir(tmp + "/tree"));
    EDT_ASSIGN_OR_RETURN(LayerStats stats, unpack_layer(blob_path(blob.digest), blob.digest, tree.get(), limits));
    if (stats.diff_id != diff_id) {
      return invalid_argument("layer " + blob.digest.str() + ": its uncompressed content is " + stats.diff_id.str() +
                              ", but the image's config says " + diff_id.str());
    }
    nlohmann::json info{{"blob", blob.digest.str()}, {"unpacked_bytes", stats.bytes}, {"entries", stats.entries},
                        {"setid_stripped", stats.setid_stripped}};
    EDT_RETURN_IF_ERROR(replace_durably(tmp + "/layer.json", info.dump()));
    return stats;
  }();
  if (!unpacked.is_ok()) {
    (void)remove_path(tmp);  // no partial layer stays behind
    return unpacked.status();
  }
  EDT_RETURN_IF_ERROR(publish_dir(tmp, final_path));
  record.unpacked_bytes = unpacked->bytes;
  return record;
}

Result<std::string> Store::ensure_root(const Digest& chain_id, const std::vector<LayerRecord>& layers) {
  const std::string final_path = root_ + "/roots/sha256/" + chain_id.hex;
  if (::access(final_path.c_str(), F_OK) == 0) return final_path;
  const std::string tmp = tmp_path("root");
  EDT_RETURN_IF_ERROR(make_dirs(tmp));
  ::chmod(tmp.c_str(), 0755);
  std::vector<std::string> trees;
  for (const LayerRecord& l : layers) trees.push_back(root_ + "/layers/sha256/" + l.diff_id.hex + "/tree");
  Status status = [&] {
    EDT_ASSIGN_OR_RETURN(UniqueFd dest, open_dir(tmp));
    return assemble_root(trees, dest.get());
  }();
  if (!status.is_ok()) {
    (void)remove_path(tmp);
    return status;
  }
  EDT_RETURN_IF_ERROR(publish_dir(tmp, final_path));
  return final_path;
}

Result<Store::ImagePlan> Store::plan_image(const Digest& manifest_digest) const {
  const std::string what = "manifest " + manifest_digest.str();
  ImagePlan plan;
  plan.digest = manifest_digest;
  EDT_ASSIGN_OR_RETURN(std::string text, read_document(manifest_digest, "manifest"));
  EDT_ASSIGN_OR_RETURN(plan.manifest, parse_manifest(text, what));
  const Descriptor& config_blob = plan.manifest.config;
  EDT_RETURN_IF_ERROR(check_blob_size(blob_path(config_blob.digest), config_blob, what + " config"));
  EDT_ASSIGN_OR_RETURN(std::string config_text, read_document(config_blob.digest, "config"));
  EDT_ASSIGN_OR_RETURN(plan.config, parse_config(config_text, "config " + config_blob.digest.str()));
  const ImageConfig& config = plan.config;
  if ((!config.os.empty() && config.os != "linux") || (!config.architecture.empty() && config.architecture != "amd64")) {
    return invalid_argument(what + " is an image for " + config.os + "/" + config.architecture + ", not linux/amd64");
  }
  if (config.diff_ids.size() != plan.manifest.layers.size()) {
    return invalid_argument(what + " has " + std::to_string(plan.manifest.layers.size()) + " layers, its config " +
                            std::to_string(config.diff_ids.size()) + " diff IDs");
  }
  return plan;
}

Result<LayerRecord> Store::prepare_layer(const Lock&, const ImagePlan& plan, size_t i, ImageBytes& image) {
  const std::string what = "manifest " + plan.digest.str();
  const Descriptor& layer = plan.manifest.layers.at(i);
  EDT_RETURN_IF_ERROR(check_blob_size(blob_path(layer.digest), layer, what + " layers[" + std::to_string(i) + "]"));
  EDT_ASSIGN_OR_RETURN(LayerRecord l, ensure_layer(layer, plan.config.diff_ids[i], image));
  if (image.over()) {
    return Status(StatusCode::kResourceExhausted, what + ": the layers unpack to more than the image bound of " +
                                                      std::to_string(limits_.max_image_bytes) + " bytes");
  }
  return l;
}

Result<ImageRecord> Store::build_record(const Lock& lock, const std::string& name, const Digest& manifest_digest) {
  EDT_ASSIGN_OR_RETURN(ImagePlan plan, plan_image(manifest_digest));
  ImageRecord record;
  record.name = name;
  record.manifest = manifest_digest;
  record.config = plan.manifest.config.digest;
  record.config_fields = plan.config;
  ImageBytes image(limits_.max_image_bytes);
  for (size_t i = 0; i < plan.manifest.layers.size(); ++i) {
    EDT_ASSIGN_OR_RETURN(LayerRecord l, prepare_layer(lock, plan, i, image));
    record.layers.push_back(std::move(l));
  }
  record.chain_id = chain_id_of(record.layers);
  EDT_ASSIGN_OR_RETURN(record.root, ensure_root(record.chain_id, record.layers));
  record.created = static_cast<int64_t>(std::time(nullptr));
  return record;
}

Result<ImageRecord> Store::commit_image(const Lock& lock, const std::string& name, const Digest& manifest) {
  EDT_RETURN_IF_ERROR(check_image_name(name));
  EDT_ASSIGN_OR_RETURN(ImageRecord record, build_record(lock, name, manifest));
  EDT_RETURN_IF_ERROR(replace_durably(root_ + "/images/" + sha256_of(name).hex + ".json", record_to_json(record)));
  return record;
}

Result<std::vector<ImageRecord>> Store::list() const {
  EDT_ASSIGN_OR_RETURN(std::vector<std::string> names, names_in(root_ + "/images"));
  std::vector<ImageRecord> out;
  for (const std::string& file : names) {
    if (file.size() != 69 || file.substr(64) != ".json") continue;  // a .tmp a kill left
    const std::string path = root_ + "/images/" + file;
    EDT_ASSIGN_OR_RETURN(std::string text, read_bounded(path, limits_.max_document_bytes));
    EDT_ASSIGN_OR_RETURN(ImageRecord r, record_from_json(text, path));
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const ImageRecord& a, const ImageRecord& b) { return a.name < b.name; });
  return out;
}

Result<ImageRecord> Store::get(const std::string& name) const {
  const std::string path = root_ + "/images/" + sha256_of(name).hex + ".json";
  if (::access(path.c_str(), F_OK) != 0) {
    return Status(StatusCode::kNotFound, "name", "no image named '" + name + "' in the store " + root_,
                  "edt-image list shows the images there are");
  }
  EDT_ASSIGN_OR_RETURN(std::string text, read_bounded(path, limits_.max_document_bytes));
  return record_from_json(text, path);
}

Result<GcStats> Store::remove(const Lock& lock, const std::string& name, const std::set<std::string>& roots_in_use) {
  EDT_RETURN_IF_ERROR(get(name).status());
  const std::string path = root_ + "/images/" + sha256_of(name).hex + ".json";
  if (::unlink(path.c_str()) != 0) return io_error("unlink " + path, errno);
  EDT_ASSIGN_OR_RETURN(UniqueFd dir, open_dir(root_ + "/images"));
  ::fsync(dir.get());
  return gc(lock, roots_in_use);
}

Result<GcStats> Store::gc(const Lock&, const std::set<std::string>& roots_in_use) { return sweep(&roots_in_use); }

Result<GcStats> Store::gc_blobs(const Lock&) { return sweep(nullptr); }

Result<GcStats> Store::sweep(const std::set<std::string>* roots_in_use) {
  std::set<std::string> blobs, layers, roots;
  EDT_ASSIGN_OR_RETURN(std::vector<ImageRecord> records, list());
  for (const ImageRecord& r : records) {
    blobs.insert({r.manifest.hex, r.config.hex});
    roots.insert(r.chain_id.hex);
    for (const LayerRecord& l : r.layers) {
      blobs.insert(l.digest.hex);
      layers.insert(l.diff_id.hex);
    }
  }
  GcStats stats;
  auto sweep_dir = [&](const std::string& dir, const std::set<std::string>& live, uint64_t& count) -> Status {
    EDT_ASSIGN_OR_RETURN(UniqueFd fd, open_dir(root_ + "/" + dir));
    EDT_ASSIGN_OR_RETURN(std::vector<std::string> names, names_in(root_ + "/" + dir));
    for (const std::string& name : names) {
      if (live.count(name)) continue;
      EDT_RETURN_IF_ERROR(remove_at(fd.get(), name));
      ++count;
    }
    return Status::ok();
  };
  if (roots_in_use != nullptr) {
    for (const std::string& root : *roots_in_use) roots.insert(fs::path(root).filename().string());
    // A root shares its files' inodes with its layers and never names them:
    // a layer goes while a root in use still has its files.
    EDT_RETURN_IF_ERROR(sweep_dir("roots/sha256", roots, stats.roots));
    EDT_RETURN_IF_ERROR(sweep_dir("layers/sha256", layers, stats.layers));
  }
  EDT_RETURN_IF_ERROR(sweep_dir("blobs/sha256", blobs, stats.blobs));
  return stats;
}

}  // namespace edt::image
