// Compiled as part of edt_kernels (a leaf): transport is a layer above.
#include "transport/transport.h"

int layering_probe_leaf() { return 0; }
