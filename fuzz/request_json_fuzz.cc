// Request bodies of edtd's API: the bytes as parse_request_json() reads them
// (control/api/request_json.h), then the value through every resource's
// parse_*() (control/model/), as a route would read it. Whatever the body,
// each step answers a value or a refusal (a Status with its field, message
// and fix), and a refusal goes into a JSON response: its texts must be
// UTF-8 (json's dump() throws otherwise).
#include <cstdint>

#include "control/api/request_json.h"
#include "control/model/cluster.h"
#include "control/model/cluster_json.h"
#include "control/model/requests.h"
#include "fuzz_check.h"

namespace {

using nlohmann::json;

void check(const edt::Status& refusal, std::string_view step) {
  if (refusal.is_ok()) return;
  FUZZ_CHECK(!refusal.message().empty(), std::string(step) + ": an error without a message");
  FUZZ_CHECK(edt::utf8::is_valid(refusal.field()) && edt::utf8::is_valid(refusal.message()) &&
                 edt::utf8::is_valid(refusal.fix()),
             std::string(step) + ": an error that is not UTF-8: " + edt::utf8::sanitized(refusal.message()));
  (void)json{{"field", refusal.field()}, {"message", refusal.message()}, {"fix", refusal.fix()}}.dump();
}

// Every body parser of the API over one value.
void parse_as_every_request(const json& body) {
  edt::control::ClusterSpec spec;
  check(edt::control::parse_cluster_spec(body, &spec), "parse_cluster_spec");
  edt::control::ScaleRequest scale;
  check(edt::control::parse_scale_request(body, &scale), "parse_scale_request");
  edt::control::VolumeRequest volume;
  check(edt::control::parse_volume_request(body, &volume), "parse_volume_request");
  edt::control::Image image;
  check(edt::control::parse_image_request(body, &image), "parse_image_request");
  std::string user;
  check(edt::control::parse_user_request(body, &user), "parse_user_request");
  edt::control::TokenRequest token;
  check(edt::control::parse_token_request(body, &token), "parse_token_request");
  edt::control::JobRequest job;
  check(edt::control::parse_job_request(body, &job), "parse_job_request");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = edt::fuzz::text_of(data, size);
  const edt::control::JsonLimits limits{.max_depth = 8};
  auto body = edt::control::parse_request_json(bytes, limits);
  if (!body.is_ok()) {
    check(body.status(), "parse_request_json");
    return 0;
  }
  (void)body->dump();
  parse_as_every_request(*body);
  return 0;
}
