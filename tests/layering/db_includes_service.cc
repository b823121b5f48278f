// Must not compile: the database (control/db) sits below the service layer
// (control/service), which uses it.
#include "control/service/service.h"
