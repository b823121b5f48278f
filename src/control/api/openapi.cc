// openapi_document(): the API contract, api/openapi.json, as the build
// embedded it (api/CMakeLists.txt). edtd serves it at /api/v1/openapi.json.
#include "control/api/server.h"
#include "edt_api/contract.h"

namespace edt::control {

const std::string& openapi_document() {
  static const std::string kDocument(api::openapi_text());
  return kDocument;
}

}  // namespace edt::control
