// Compiled as part of edt_transport: its own headers and its DEPS' resolve.
#include "common/net.h"
#include "kernels/reduce.h"
#include "transport/transport.h"

int layering_probe_own() { return 0; }
