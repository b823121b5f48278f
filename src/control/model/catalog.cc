#include "control/model/catalog.h"

#include <algorithm>

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
  return {{"name", i.name}, {"root", i.root}, {"frameworks", i.frameworks}, {"builtin", i.builtin}};
}

json volume_to_json(const Volume& v) {
  return {{"name", v.name}, {"owner", v.owner}, {"host_path", v.host_path}, {"managed", v.managed}};
}

json gpu_to_json(const Gpu& g) {
  return {{"index", g.index}, {"model", g.model}, {"simulated", g.simulated}, {"holder", g.holder}, {"held", g.held}};
}

}  // namespace edt::control
