// Service: images imported or pulled into edtd's image store, and their
// removal.
//
// Who may: an admin imports, pulls and removes images; every user may use
// every image (images are the site's, as the built-in one is). A user
// importing for their own use would make edtd read a path of its host on
// their behalf (edtd reads what they could not); a user's pull would make
// edtd a client, from its own host and network, of any address they name
// (a server-side request forgery into the site's network); and both would
// fill a store that all share with no quota: so not yet (docs/images.md).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "common/log.h"
#include "common/units.h"
#include "control/backends/local/container_fs.h"
#include "control/service/service.h"
#include "image/import.h"
#include "image/registry.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

const char* const kPathFix = "give the absolute path, on edtd's host, of an OCI layout (a directory or a tar of one) "
                             "or of a docker save archive";

// The source must be a plain absolute path to a file or directory that is
// not edtd's own (its database, keys and volumes lie under its data dir).
Status check_source_path(const std::string& path, const std::string& data_dir) {
  if (path.empty() || path[0] != '/' || fs::path(path).lexically_normal().string() != path)
    return invalid("path", "'" + path + "' is not an absolute path without '.', '..' or '//'", kPathFix);
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  if (ec) return invalid("path", "cannot read '" + path + "': " + ec.message(), kPathFix);
  const fs::path data = fs::weakly_canonical(data_dir, ec);
  if (!data_dir.empty() && path_within(real.string(), data.string()))
    return forbidden("path", "'" + path + "' is inside edtd's data directory", kPathFix);
  struct stat st;
  if (::stat(real.c_str(), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
    return invalid("path", "'" + path + "' is not a file or a directory", kPathFix);
  return Status::ok();
}

// What edtd's record of a stored image takes beside the store's record.
struct StoredAs {
  std::string name, source;
  std::vector<std::string> frameworks;
};

// The frameworks asked for, else the edt frameworks the label names
// ("deepspeed,torch": deepspeed; its other words, the libraries it has,
// stay in the labels), else horovod: edt's launcher, over any torch or
// TensorFlow.
std::vector<std::string> image_frameworks(const StoredAs& request, const image::ImageRecord& record) {
  if (!request.frameworks.empty()) return request.frameworks;
  std::vector<std::string> out;
  auto label = record.config_fields.labels.find("org.edt.frameworks");
  if (label != record.config_fields.labels.end()) {
    const auto& known = known_frameworks();
    std::string text = label->second;
    for (char& c : text) c = c == ',' ? ' ' : c;
    std::istringstream words(text);
    for (std::string f; words >> f;)
      if (std::find(known.begin(), known.end(), f) != known.end()) out.push_back(f);
  }
  if (out.empty()) out = {"horovod"};
  return out;
}

// A container binds the root's /usr and /etc (bwrap_args.cc): each must be
// a directory of the image, never a link that the host would follow.
Status check_runnable_root(const std::string& root) {
  for (const char* top : {"usr", "etc"}) {
    struct stat st;
    if (::lstat((root + "/" + top).c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return invalid("path", std::string("the image has no /") + top + " directory (or it is a symbolic link)",
                     "import an image of a Linux distribution's root (with /usr and /etc)");
  }
  return Status::ok();
}

// The image's User must name a user its containers can run as
// (container_fs.h, resolve_in_image).
Status check_image_user(const image::ImageRecord& record) {
  return resolve_in_image(record.root, record.config_fields.user).status();
}

Image image_of_record(const StoredAs& request, const image::ImageRecord& record) {
  Image image;
  image.name = request.name;
  image.root = record.root;
  image.source = request.source;
  image.digest = record.manifest.str();
  for (const auto& l : record.layers) image.size_bytes += l.unpacked_bytes;
  image.env = record.config_fields.env;
  image.working_dir = record.config_fields.working_dir;
  image.user = record.config_fields.user;
  image.labels = record.config_fields.labels;
  return image;
}

// The roots that clusters' containers may use: spared by the store's gc.
std::set<std::string> roots_in_use(Database::Tx& tx) {
  std::set<std::string> used, roots;
  for (const auto& c : tx.clusters()) used.insert(c.spec.image);
  for (const auto& i : tx.images())
    if (i.stored() && used.count(i.name)) roots.insert(i.root);
  return roots;
}

// The store's refusal of a source (not a layout or an archive, a hostile
// layer, a bound passed): 422 with its message. The path was checked
// readable, so what fails is the source, but edtd's own faults.
Status as_import_refusal(const Status& st) {
  if (st.code() == StatusCode::kInternal) return st;
  return invalid("path", st.message(), kPathFix);
}

// A pull's failure, as a refusal of the request (422) that names what to
// change; edtd's own faults stay 500. Never the credentials: the puller's
// messages name the user at most.
Status as_pull_refusal(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInternal:
    case StatusCode::kIoError: return st;
    case StatusCode::kUnauthenticated:
      return invalid("password", st.message(), "give the registry's user and password (edt image pull --username U "
                                               "--password-stdin), or check them");
    case StatusCode::kUnavailable:
      return invalid("reference", st.message(), "check the registry's name and that edtd's host reaches it (and "
                                                "trusts its certificate: edtd --registry-ca-file); then retry");
    case StatusCode::kNotFound: return invalid("reference", st.message(), "check the repository and the tag");
    default: return invalid("reference", st.message(), "the registry's image is refused as it is; see the message");
  }
}

// "127.0.0.1:5000/team/pytorch:24.05-py3" -> "pytorch-24-05-py3"; by digest,
// the repository's last name and the digest's first 12 digits.
std::string image_name_of(const image::Reference& ref) {
  const std::string text = ref.repository.substr(ref.repository.rfind('/') + 1) + "-" +
                           (ref.digest ? ref.digest->short_str() : ref.tag);
  std::string name;
  for (char c : text) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c));
    if (ok || (!name.empty() && name.back() != '-')) name += ok ? static_cast<char>(std::tolower(c)) : '-';
  }
  name = name.substr(0, 63);
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name;
}

// An image's name must be new: never over an existing image, whose root
// running containers may use (the store frees it once no record names it).
Status check_new_image_name(const std::string& name, const std::string& store, const std::vector<Image>& images) {
  EDT_RETURN_IF_ERROR(check_resource_name(name, "name", "image"));
  if (store.empty()) return conflict("name", "this edtd has no image store", "start edtd with --image-store");
  for (const auto& i : images)
    if (i.name == name)
      return conflict("name", "image " + i.name + (i.builtin ? " is built in" : " exists"),
                      i.builtin ? "choose another name" : "choose another name, or delete it first (edt image rm)");
  return Status::ok();
}

// Records the store's image in the database. A refused one (`st`: the
// store's refusal; no /usr; the database failed) leaves nothing, its store
// record, layers and root freed, unless `undo` is false and the store made
// no record (a pull that broke off keeps its whole blobs for the retry).
Result<Image> keep_stored_image(Database& db, const StoredAs& as, image::Store& store,
                                const Result<image::ImageRecord>& record, Status st, bool undo) {
  if (st.is_ok()) st = check_runnable_root(record.value().root);
  if (st.is_ok()) st = check_image_user(record.value());
  if (st.is_ok()) {
    Image image = image_of_record(as, record.value());
    image.frameworks = image_frameworks(as, record.value());
    auto tx = db.transaction();
    st = tx.put_image(image);
    if (st.is_ok()) st = tx.commit();
    if (st.is_ok()) return image;
  }
  if (!undo && !record.is_ok()) return st;
  Status undone = [&]() -> Status {
    EDT_ASSIGN_OR_RETURN(image::Store::Lock lock, store.lock());
    auto tx = db.lock();
    const std::set<std::string> spare = roots_in_use(tx);
    if (record.is_ok()) return store.remove(lock, as.name, spare).status();
    return store.gc(lock, spare).status();
  }();
  if (!undone.is_ok()) log::warn("image {}: undo a refused image: {}", as.name, undone.message());
  return st;
}

}  // namespace

Result<Image> Service::import_image(const User& by, const ImageImport& request) {
  if (!by.admin) return admin_only("import images");
  EDT_RETURN_IF_ERROR(check_new_image_name(request.name, options_.image_store, images()));
  EDT_RETURN_IF_ERROR(check_source_path(request.path, options_.data_dir));
  EDT_ASSIGN_OR_RETURN(image::Store store, image::Store::open(options_.image_store));
  auto record = image::import_path(store, request.path, {request.name});
  Status st = record.is_ok() ? Status::ok() : as_import_refusal(record.status());
  auto image = keep_stored_image(*db_, {request.name, request.path, request.frameworks}, store, record, st, true);
  return image.is_ok() ? image : as_refusal(image.status(), "path");
}

Result<PulledImage> Service::pull_image(const User& by, const ImagePull& request) {
  if (!by.admin) return admin_only("pull images");
  auto ref = image::parse_reference(request.reference);
  if (!ref.is_ok()) return ref.status();
  const std::string name = request.name.empty() ? image_name_of(*ref) : request.name;
  EDT_RETURN_IF_ERROR(check_new_image_name(name, options_.image_store, images()));
  if (request.username.empty() != request.password.empty())
    return invalid(request.username.empty() ? "username" : "password", "a registry's credentials are a user and a password",
                   "give both, or neither for an anonymous pull");
  EDT_ASSIGN_OR_RETURN(ImagePulls::Ticket ticket, pulls_->start(name, ref->str(), unix_seconds()));
  EDT_ASSIGN_OR_RETURN(image::Store store, image::Store::open(options_.image_store));
  image::PullStats stats;
  auto record = [&]() -> Result<image::ImageRecord> {
    EDT_ASSIGN_OR_RETURN(image::Store::Lock lock, store.lock());
    ticket.pull().in_store = true;
    return image::pull_image(store, lock, *ref,
                             {name, {request.username, request.password}, options_.registry, &ticket.pull().progress},
                             &stats);
  }();
  if (record.is_ok())
    log::info("image {}: pulled {} ({} blobs, {} bytes fetched; {} blobs the store had)", name, ref->str(),
              stats.fetched_blobs, stats.fetched_bytes, stats.reused_blobs);
  const Status st = record.is_ok() ? Status::ok() : as_pull_refusal(record.status());
  // Content refused (a digest, a size, a hostile layer) is freed; a pull
  // that broke off (the network, the registry's refusal) keeps its blobs.
  const auto c = record.status().code();
  const bool refused_content = c == StatusCode::kInvalidArgument || c == StatusCode::kMalformed ||
                               c == StatusCode::kResourceExhausted;
  EDT_ASSIGN_OR_RETURN(Image image, keep_stored_image(*db_, {name, ref->str(), request.frameworks}, store, record, st,
                                                      refused_content));
  return PulledImage{image, stats.fetched_blobs, stats.fetched_bytes, stats.reused_blobs};
}

std::vector<ImagePullState> Service::image_pulls() const { return pulls_->list(); }

Result<Image> Service::delete_image(const User& by, const std::string& name) {
  if (!by.admin) return admin_only("delete images");
  Image found;
  std::set<std::string> spare;
  {
    auto tx = db_->transaction();
    auto all = tx.images();
    auto it = std::find_if(all.begin(), all.end(), [&](const Image& i) { return i.name == name; });
    if (it == all.end()) return missing("name", "image '" + name + "' does not exist", "see edt image list");
    if (it->builtin) return conflict("name", "image " + name + " is built in", "it cannot be deleted");
    for (const auto& c : tx.clusters())
      if (c.spec.image == name)
        return conflict("name", "image '" + name + "' is used by cluster " + c.spec.name + "; delete that cluster first",
                        "wait, or change what it depends on");
    found = *it;
    spare = roots_in_use(tx);
    Status st = tx.delete_image(name);
    if (st.is_ok()) st = tx.commit();
    if (!st.is_ok()) return as_refusal(st, "name");
  }
  if (!found.stored() || options_.image_store.empty()) return found;
  Status freed = [&]() -> Status {
    EDT_ASSIGN_OR_RETURN(image::Store store, image::Store::open(options_.image_store));
    EDT_ASSIGN_OR_RETURN(image::Store::Lock lock, store.lock());
    return store.remove(lock, name, spare).status();
  }();
  if (!freed.is_ok()) log::warn("image {}: free its store space: {}", name, freed.message());
  return found;
}

}  // namespace edt::control
