// The backend of --backend, made from the checked flags: a LocalBackend
// (this machine, with its bridge or loopback network, the warm interpreter
// started) or a SlurmBackend (each container a job on a node of the
// partition). Called once, from main's thread, before edtd serves.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "control/backends/local/local_backend.h"
#include "edtd_flags.h"

namespace edt::control {

// `base_env`: what every container's environment starts with (edt's PATH,
// PYTHONPATH), for the warm interpreter's workers.
std::unique_ptr<LocalBackend> make_backend(const Flags& flags, const Settings& settings,
                                           const std::map<std::string, std::string>& base_env);

}  // namespace edt::control
