// What the engine adds to edt/types.h: reduction op names as Horovod prints
// them in errors, shapes, and in-place scaling for the prescale/postscale
// factors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "edt/types.h"

namespace edt::engine {

using edt::DataType;
using edt::ReduceOp;

// "Sum", "Average", ...: Horovod's spelling.
const char* op_name(ReduceOp op);

// "[2, 3]": a shape as Horovod's mismatch messages print it.
std::string shape_string(const std::vector<int64_t>& shape);
int64_t num_elements(const std::vector<int64_t>& shape);

}  // namespace edt::engine
