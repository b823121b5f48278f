// CommunicatorCollectives: the engine's CollectiveBackend over libedt's
// Communicator, the one every real job uses.
#pragma once

#include <memory>

#include "edt/communicator.h"
#include "engine/collective_backend.h"

namespace edt::engine {

std::unique_ptr<CollectiveBackend> communicator_collectives(std::shared_ptr<Communicator> communicator);

}  // namespace edt::engine
