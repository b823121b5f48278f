// Service: images imported into edtd's image store, and their removal.
//
// Who may: an admin imports and removes images; every user may use every
// image (images are the site's, as the built-in one is). A user importing
// for their own use would make edtd read a path of its host on their
// behalf (edtd reads what they could not) and fill a store that all share
// with no quota: so not yet; an upload with a per-user bound is the way to
// it (docs/images.md).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "common/log.h"
#include "control/service/service.h"
#include "image/import.h"

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

// The frameworks asked for, else the edt frameworks the label names
// ("deepspeed,torch": deepspeed; its other words, the libraries it has,
// stay in the labels), else horovod: edt's launcher, over any torch or
// TensorFlow.
std::vector<std::string> image_frameworks(const ImageImport& request, const image::ImageRecord& record) {
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

Image image_of_record(const ImageImport& request, const image::ImageRecord& record) {
  Image image;
  image.name = request.name;
  image.root = record.root;
  image.source = request.path;
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

}  // namespace

Result<Image> Service::import_image(const User& by, const ImageImport& request) {
  if (!by.admin) return admin_only("import images");
  if (options_.image_store.empty()) return conflict("path", "this edtd has no image store", "start edtd with --image-store");
  EDT_RETURN_IF_ERROR(check_resource_name(request.name, "name", "image"));
  EDT_RETURN_IF_ERROR(check_source_path(request.path, options_.data_dir));
  // Never over an existing image: running containers may use its root,
  // which the store would free once no record names it.
  for (const auto& i : images())
    if (i.name == request.name)
      return conflict("name", "image " + i.name + (i.builtin ? " is built in" : " exists"),
                      i.builtin ? "choose another name" : "choose another name, or delete it first (edt image rm)");
  EDT_ASSIGN_OR_RETURN(image::Store store, image::Store::open(options_.image_store));
  auto record = image::import_path(store, request.path, {request.name});
  Status st = record.is_ok() ? check_runnable_root(record->root) : as_import_refusal(record.status());
  if (st.is_ok()) {
    Image image = image_of_record(request, *record);
    image.frameworks = image_frameworks(request, *record);
    auto tx = db_->transaction();
    st = tx.put_image(image);
    if (st.is_ok()) st = tx.commit();
    if (st.is_ok()) return image;
  }
  // Nothing of a refused import stays: its record, layers and root go.
  Status undo = [&]() -> Status {
    EDT_ASSIGN_OR_RETURN(image::Store::Lock lock, store.lock());
    auto tx = db_->lock();
    const std::set<std::string> spare = roots_in_use(tx);
    if (record.is_ok()) return store.remove(lock, request.name, spare).status();
    return store.gc(lock, spare).status();
  }();
  if (!undo.is_ok()) log::warn("image {}: undo a refused import: {}", request.name, undo.message());
  return as_refusal(st, "path");
}

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
