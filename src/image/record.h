// An image record as JSON (the files under images/ of the store), both
// ways. Reading checks every digest, so a record read is safe to use in paths.
#pragma once

#include <string>

#include "edt/status.h"
#include "image/store.h"

namespace edt::image {

std::string record_to_json(const ImageRecord& record);
Result<ImageRecord> record_from_json(const std::string& text, const std::string& what);

}  // namespace edt::image
