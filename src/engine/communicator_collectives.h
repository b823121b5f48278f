// CommunicatorCollectives: the engine's Collectives over libedt's
// Communicator, the one every real job uses.
#pragma once

#include <memory>

#include "edt/communicator.h"
#include "engine/collectives.h"

namespace edt::engine {

std::unique_ptr<Collectives> communicator_collectives(std::shared_ptr<Communicator> communicator);

}  // namespace edt::engine
