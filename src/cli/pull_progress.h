// How far an image pull has come, as `edt image pull` shows it while it
// waits for edtd's answer and `edt image pulls` lists it (GET /images/pulls).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/client.h"

namespace edt::cli {

// "fetching: layers 3/10 fetched, 2 unpacked; 120/1024 MiB" for one
// ImagePullProgress.
std::string describe_pull(const nlohmann::json& pull);

// Runs `call` (the POST of a pull) while it shows on stderr how far the pull
// of image `name` (none: the pull whose reference ends with `reference`)
// has come, asking edtd once a second: one line rewritten in place on a
// terminal, else a line each time the phase or a layer count changes (and
// every 10 s between).
std::optional<ApiFailure> with_pull_progress(const std::string& name, const std::string& reference,
                                             const std::function<std::optional<ApiFailure>()>& call);

}  // namespace edt::cli
