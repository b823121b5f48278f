// The image pulls under way, for GET /images/pulls: a pull is listed from
// its request until its answer (a Ticket's lifetime) with its progress,
// which the pull's threads write and a listing reads (image::ImportProgress).
// Two pulls of one name at once are refused: the second would replace the
// first's image the moment it ended.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/model/catalog.h"
#include "edt/status.h"
#include "image/import.h"

namespace edt::control {

class ImagePulls {
 public:
  struct Pull {
    std::string name, reference;
    int64_t started_at = 0;               // unix seconds
    std::atomic<bool> in_store{false};    // has the store's lock: no longer waiting
    image::ImportProgress progress;
  };

  // Lists its pull while it lives.
  class Ticket {
   public:
    Ticket(ImagePulls* owner, std::shared_ptr<Pull> pull) : owner_(owner), pull_(std::move(pull)) {}
    Ticket(Ticket&& other) noexcept : owner_(other.owner_), pull_(std::move(other.pull_)) {}
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();
    Pull& pull() { return *pull_; }

   private:
    ImagePulls* owner_;
    std::shared_ptr<Pull> pull_;
  };

  // A ticket for a pull of image `name`; a Conflict while one of that name is under way.
  Result<Ticket> start(const std::string& name, const std::string& reference, int64_t now);
  // The pulls under way, oldest first.
  std::vector<ImagePullState> list() const;

 private:
  mutable std::mutex mu_;
  std::list<std::shared_ptr<Pull>> pulls_;
};

}  // namespace edt::control
