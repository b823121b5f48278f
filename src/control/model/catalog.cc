#include "control/model/catalog.h"

#include <algorithm>
#include <set>

#include "control/model/fields.h"

namespace edt::control {

using nlohmann::json;

bool Image::carries(const std::string& framework) const {
  return std::find(frameworks.begin(), frameworks.end(), framework) != frameworks.end();
}

Status check_against_catalog(const ClusterSpec& spec, const Catalog& catalog, int new_containers) {
  auto image = catalog.images.find(spec.image);
  if (image == catalog.images.end()) {
    std::vector<std::string> names;
    for (const auto& [name, _] : catalog.images) names.push_back(name);
    return invalid("image", "unknown image '" + spec.image + "'", "choose one of: " + comma_list(names));
  }
  if (!image->second.carries(spec.framework))
    return invalid("image", "image " + spec.image + " carries " + comma_list(image->second.frameworks) +
                                      ", not " + spec.framework,
                         "choose an image that carries " + spec.framework + " (see GET /api/v1/images)");
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    if (!catalog.volumes.count(spec.mounts[i].volume))
      return invalid("mounts[" + std::to_string(i) + "].volume", "unknown volume '" + spec.mounts[i].volume + "'",
                           "create it first: edt volume create " + spec.mounts[i].volume);
  }
  if (spec.gpu.count > 0) {
    auto total = catalog.gpus_total.find(spec.gpu.model);
    if (total == catalog.gpus_total.end()) {
      std::vector<std::string> models;
      for (const auto& [model, _] : catalog.gpus_total) models.push_back(model);
      return invalid("gpu.model", "unknown GPU model '" + spec.gpu.model + "'",
                           models.empty() ? "this machine has no GPUs; leave gpu out"
                                          : "choose one of: " + comma_list(models));
    }
    // More than are free waits in the queue; more than there are never fits.
    const int want = spec.gpu.count * std::max(spec.containers, new_containers);
    if (want > total->second)
      return conflict("gpu.count", std::to_string(std::max(spec.containers, new_containers)) + " containers x " +
                                       std::to_string(spec.gpu.count) + " " + spec.gpu.model + " need " +
                                       std::to_string(want) + " GPUs; this machine has " +
                                       std::to_string(total->second),
                      "ask for fewer containers or GPUs");
  }
  return Status::ok();
}

std::string gpu_shortage(const ClusterSpec& spec, const Catalog& catalog, int new_containers) {
  if (spec.gpu.count <= 0 || new_containers <= 0) return "";
  auto free_of_model = catalog.gpus_free.find(spec.gpu.model);
  const int free = free_of_model == catalog.gpus_free.end() ? 0 : free_of_model->second;
  const int want = spec.gpu.count * new_containers;
  if (want <= free) return "";
  return std::to_string(new_containers) + " containers x " + std::to_string(spec.gpu.count) + " " + spec.gpu.model +
         " need " + std::to_string(want) + " GPUs; " + std::to_string(free) + " are free";
}

json user_to_json(const User& u) { return {{"name", u.name}, {"admin", u.admin}, {"team", u.team}}; }

json token_info_to_json(const TokenInfo& t, int64_t now) {
  return {{"id", t.id},           {"user", t.user},       {"description", t.description},
          {"created_at", t.created_at}, {"expires_at", t.expires_at}, {"expired", t.expired(now)}};
}

json image_to_json(const Image& i) {
  return {{"name", i.name},     {"root", i.root},           {"frameworks", i.frameworks},
          {"builtin", i.builtin}, {"source", i.source},     {"digest", i.digest},
          {"size_bytes", i.size_bytes}, {"env", i.env},     {"working_dir", i.working_dir},
          {"user", i.user},     {"labels", i.labels}};
}

std::string image_config_text(const Image& i) {
  return json{{"source", i.source}, {"digest", i.digest}, {"size_bytes", i.size_bytes}, {"env", i.env},
              {"working_dir", i.working_dir}, {"user", i.user}, {"labels", i.labels}}
      .dump();
}

void read_image_config(const std::string& text, Image* image) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return;
  image->source = j.value("source", "");
  image->digest = j.value("digest", "");
  image->size_bytes = j.value("size_bytes", uint64_t{0});
  image->env = j.value("env", std::vector<std::string>{});
  image->working_dir = j.value("working_dir", "");
  image->user = j.value("user", "");
  image->labels = j.value("labels", std::map<std::string, std::string>{});
}

namespace {

// edt's own directories of `base` (its tools, its virtual environment),
// then the image's PATH: the system directories come from the image's.
std::string merge_path(const std::string& base, const std::string& image) {
  static const std::set<std::string> kSystem = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                                "/usr/bin",        "/sbin",           "/bin"};
  std::string out;
  size_t start = 0;
  while (start <= base.size()) {
    const size_t end = std::min(base.find(':', start), base.size());
    const std::string dir = base.substr(start, end - start);
    if (!dir.empty() && !kSystem.count(dir)) out += dir + ":";
    start = end + 1;
  }
  return out + image;
}

}  // namespace

std::map<std::string, std::string> image_base_env(const Image& image,
                                                  const std::map<std::string, std::string>& base) {
  std::map<std::string, std::string> env = base;
  for (const auto& entry : image.env) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string key = entry.substr(0, eq), value = entry.substr(eq + 1);
    auto mine = base.find(key);
    if (mine == base.end() || mine->second.empty())
      env[key] = value;
    else if (key == "PATH")
      env[key] = merge_path(mine->second, value);
    else if (key == "PYTHONPATH")
      env[key] = mine->second + ":" + value;  // edt's package stays importable
    else
      env[key] = value;
  }
  return env;
}

json volume_to_json(const Volume& v) {
  return {{"name", v.name}, {"owner", v.owner}, {"host_path", v.host_path}, {"managed", v.managed}};
}

json gpu_to_json(const Gpu& g) {
  return {{"index", g.index}, {"model", g.model}, {"simulated", g.simulated}, {"holder", g.holder}, {"held", g.held}};
}

}  // namespace edt::control
