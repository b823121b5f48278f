#include "image/record.h"

#include <nlohmann/json.hpp>

namespace edt::image {
namespace {

using json = nlohmann::json;

json config_to_json(const ImageConfig& c) {
  return json{{"env", c.env},   {"working_dir", c.working_dir}, {"user", c.user}, {"entrypoint", c.entrypoint},
              {"cmd", c.cmd},   {"labels", c.labels},           {"os", c.os},     {"architecture", c.architecture}};
}

ImageConfig config_from_json(const json& j) {
  ImageConfig c;
  c.env = j.value("env", std::vector<std::string>{});
  c.working_dir = j.value("working_dir", "");
  c.user = j.value("user", "");
  c.entrypoint = j.value("entrypoint", std::vector<std::string>{});
  c.cmd = j.value("cmd", std::vector<std::string>{});
  c.labels = j.value("labels", std::map<std::string, std::string>{});
  c.os = j.value("os", "");
  c.architecture = j.value("architecture", "");
  return c;
}

Result<LayerRecord> layer_from_json(const json& j, const std::string& what) {
  LayerRecord l;
  EDT_ASSIGN_OR_RETURN(l.digest, parse_digest(j.value("digest", ""), what + ".digest"));
  EDT_ASSIGN_OR_RETURN(l.diff_id, parse_digest(j.value("diff_id", ""), what + ".diff_id"));
  l.media_type = j.value("media_type", "");
  l.size = j.value("size", uint64_t{0});
  l.unpacked_bytes = j.value("unpacked_bytes", uint64_t{0});
  return l;
}

}  // namespace

std::string record_to_json(const ImageRecord& r) {
  json layers = json::array();
  for (const LayerRecord& l : r.layers) {
    layers.push_back({{"digest", l.digest.str()}, {"diff_id", l.diff_id.str()}, {"media_type", l.media_type},
                      {"size", l.size}, {"unpacked_bytes", l.unpacked_bytes}});
  }
  json doc{{"name", r.name},   {"manifest", r.manifest.str()}, {"config", r.config.str()},
           {"chain_id", r.chain_id.str()}, {"root", r.root}, {"layers", layers},
           {"config_fields", config_to_json(r.config_fields)}, {"created", r.created}};
  return doc.dump(2) + "\n";
}

Result<ImageRecord> record_from_json(const std::string& text, const std::string& what) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return Status(StatusCode::kMalformed, what + " is not a JSON object");
  try {
    ImageRecord r;
    r.name = doc.at("name").get<std::string>();
    EDT_ASSIGN_OR_RETURN(r.manifest, parse_digest(doc.value("manifest", ""), what + " manifest"));
    EDT_ASSIGN_OR_RETURN(r.config, parse_digest(doc.value("config", ""), what + " config"));
    EDT_ASSIGN_OR_RETURN(r.chain_id, parse_digest(doc.value("chain_id", ""), what + " chain_id"));
    r.root = doc.value("root", "");
    const json& layers = doc.at("layers");
    for (size_t i = 0; i < layers.size(); ++i) {
      EDT_ASSIGN_OR_RETURN(LayerRecord l, layer_from_json(layers[i], what + " layers[" + std::to_string(i) + "]"));
      r.layers.push_back(std::move(l));
    }
    r.config_fields = config_from_json(doc.value("config_fields", json::object()));
    r.created = doc.value("created", int64_t{0});
    return r;
  } catch (const json::exception& e) {
    return Status(StatusCode::kMalformed, what + ": " + e.what());
  }
}

}  // namespace edt::image
