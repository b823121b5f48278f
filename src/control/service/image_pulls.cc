#include "control/service/image_pulls.h"

#include <algorithm>

#include "control/model/error.h"

namespace edt::control {

namespace {

// What a pull is doing, from what it has told so far.
std::string phase_of(const ImagePulls::Pull& p) {
  if (!p.in_store) return "waiting";
  const uint64_t layers = p.progress.layers;
  if (layers == 0) return "resolving";
  return p.progress.layers_fetched < layers ? "fetching" : "unpacking";
}

}  // namespace

ImagePulls::Ticket::~Ticket() {
  if (!pull_) return;  // moved from
  std::lock_guard<std::mutex> hold(owner_->mu_);
  owner_->pulls_.remove(pull_);
}

Result<ImagePulls::Ticket> ImagePulls::start(const std::string& name, const std::string& reference, int64_t now) {
  auto pull = std::make_shared<Pull>();
  pull->name = name;
  pull->reference = reference;
  pull->started_at = now;
  std::lock_guard<std::mutex> hold(mu_);
  if (std::any_of(pulls_.begin(), pulls_.end(), [&](const auto& p) { return p->name == name; }))
    return conflict("name", "image '" + name + "' is being pulled", "wait for that pull to end (edt image pulls), or give another --name");
  pulls_.push_back(pull);
  return Ticket(this, pull);
}

std::vector<ImagePullState> ImagePulls::list() const {
  std::lock_guard<std::mutex> hold(mu_);
  std::vector<ImagePullState> out;
  for (const auto& p : pulls_) {
    const image::ImportProgress& told = p->progress;
    out.push_back({p->name, p->reference, p->started_at, phase_of(*p), told.layers, told.layers_fetched,
                   told.layers_unpacked, told.bytes, told.bytes_so_far()});
  }
  return out;
}

}  // namespace edt::control
