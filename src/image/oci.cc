#include "image/oci.h"

#include <nlohmann/json.hpp>

namespace edt::image {
namespace {

using json = nlohmann::json;

Result<json> parse_object(const std::string& text, const std::string& what) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status(StatusCode::kMalformed, what + " is not a JSON object");
  }
  return doc;
}

std::string string_at(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

std::vector<std::string> strings_at(const json& obj, const char* key) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) return out;
  for (const json& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::map<std::string, std::string> string_map_at(const json& obj, const char* key) {
  std::map<std::string, std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_object()) return out;
  for (auto& [k, v] : it->items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

Result<Descriptor> parse_descriptor(const json& d, const std::string& what) {
  if (!d.is_object()) return Status(StatusCode::kMalformed, what + " is not an object");
  Descriptor out;
  out.media_type = string_at(d, "mediaType");
  EDT_ASSIGN_OR_RETURN(out.digest, parse_digest(string_at(d, "digest"), what + ".digest"));
  auto size = d.find("size");
  if (size == d.end() || !size->is_number_unsigned()) {
    return Status(StatusCode::kMalformed, what + ".size is missing or not a count of bytes");
  }
  out.size = size->get<uint64_t>();
  if (auto p = d.find("platform"); p != d.end() && p->is_object()) {
    out.os = string_at(*p, "os");
    out.architecture = string_at(*p, "architecture");
  }
  out.annotations = string_map_at(d, "annotations");
  return out;
}

bool is_layer_type(const std::string& type) {
  static const char* kTypes[] = {
      "application/vnd.oci.image.layer.v1.tar",
      "application/vnd.oci.image.layer.v1.tar+gzip",
      "application/vnd.oci.image.layer.v1.tar+zstd",
      "application/vnd.oci.image.layer.nondistributable.v1.tar",
      "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
      "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
      "application/vnd.docker.image.rootfs.diff.tar",
      "application/vnd.docker.image.rootfs.diff.tar.gzip",
      "application/vnd.docker.image.rootfs.diff.tar.zstd",
      "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
  };
  for (const char* t : kTypes) {
    if (type == t) return true;
  }
  return false;
}

}  // namespace

bool is_index(const std::string& media_type, const std::string& text) {
  if (media_type == "application/vnd.oci.image.index.v1+json" ||
      media_type == "application/vnd.docker.distribution.manifest.list.v2+json") {
    return true;
  }
  if (!media_type.empty()) return false;
  json doc = json::parse(text, nullptr, false);
  return doc.is_object() && doc.contains("manifests") && !doc.contains("layers");
}

Result<std::vector<Descriptor>> parse_index(const std::string& text, const std::string& what) {
  EDT_ASSIGN_OR_RETURN(json doc, parse_object(text, what));
  auto list = doc.find("manifests");
  if (list == doc.end() || !list->is_array()) return Status(StatusCode::kMalformed, what + " has no manifests list");
  std::vector<Descriptor> out;
  for (size_t i = 0; i < list->size(); ++i) {
    EDT_ASSIGN_OR_RETURN(Descriptor d, parse_descriptor((*list)[i], what + " manifests[" + std::to_string(i) + "]"));
    out.push_back(std::move(d));
  }
  return out;
}

Result<Manifest> parse_manifest(const std::string& text, const std::string& what) {
  EDT_ASSIGN_OR_RETURN(json doc, parse_object(text, what));
  auto version = doc.find("schemaVersion");
  if (version == doc.end() || !version->is_number_integer() || version->get<int64_t>() != 2) {
    return Status(StatusCode::kInvalidArgument, what + " is not schemaVersion 2 (Docker's schema 1 is not read)");
  }
  auto config = doc.find("config");
  auto layers = doc.find("layers");
  if (config == doc.end() || layers == doc.end() || !layers->is_array()) {
    return Status(StatusCode::kMalformed, what + " has no config or no layers list");
  }
  Manifest out;
  EDT_ASSIGN_OR_RETURN(out.config, parse_descriptor(*config, what + " config"));
  for (size_t i = 0; i < layers->size(); ++i) {
    const std::string at = what + " layers[" + std::to_string(i) + "]";
    EDT_ASSIGN_OR_RETURN(Descriptor d, parse_descriptor((*layers)[i], at));
    if (!is_layer_type(d.media_type)) {
      return Status(StatusCode::kInvalidArgument, at + " has media type '" + d.media_type +
                                                      "', not a plain, gzip or zstd tar (encrypted layers are not read)");
    }
    out.layers.push_back(std::move(d));
  }
  return out;
}

Result<ImageConfig> parse_config(const std::string& text, const std::string& what) {
  EDT_ASSIGN_OR_RETURN(json doc, parse_object(text, what));
  ImageConfig out;
  out.os = string_at(doc, "os");
  out.architecture = string_at(doc, "architecture");
  if (auto c = doc.find("config"); c != doc.end() && c->is_object()) {
    out.env = strings_at(*c, "Env");
    out.working_dir = string_at(*c, "WorkingDir");
    out.user = string_at(*c, "User");
    out.entrypoint = strings_at(*c, "Entrypoint");
    out.cmd = strings_at(*c, "Cmd");
    out.labels = string_map_at(*c, "Labels");
  }
  auto rootfs = doc.find("rootfs");
  if (rootfs == doc.end() || !rootfs->is_object()) return Status(StatusCode::kMalformed, what + " has no rootfs");
  auto ids = strings_at(*rootfs, "diff_ids");
  for (size_t i = 0; i < ids.size(); ++i) {
    EDT_ASSIGN_OR_RETURN(Digest d, parse_digest(ids[i], what + " rootfs.diff_ids[" + std::to_string(i) + "]"));
    out.diff_ids.push_back(d);
  }
  return out;
}

Result<Descriptor> pick_platform(const std::vector<Descriptor>& index, const std::string& what) {
  if (index.size() == 1 && index[0].os.empty()) return index[0];
  std::string seen;
  for (const Descriptor& d : index) {
    if (d.os == "linux" && d.architecture == "amd64") return d;
    seen += (seen.empty() ? "" : ", ") + (d.os.empty() ? "?" : d.os) + "/" + (d.architecture.empty() ? "?" : d.architecture);
  }
  return Status(StatusCode::kNotFound, what + " has no linux/amd64 image (it has: " + (seen.empty() ? "none" : seen) + ")");
}

std::string make_manifest(const Descriptor& config, const std::vector<Descriptor>& layers) {
  auto descriptor = [](const Descriptor& d) {
    return json{{"mediaType", d.media_type}, {"digest", d.digest.str()}, {"size", d.size}};
  };
  json doc{{"schemaVersion", 2}, {"mediaType", kOciManifest}, {"config", descriptor(config)}};
  doc["layers"] = json::array();
  for (const Descriptor& d : layers) doc["layers"].push_back(descriptor(d));
  return doc.dump();
}

}  // namespace edt::image
