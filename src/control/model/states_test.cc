#include "control/model/states.h"

#include <gtest/gtest.h>

#include "control/model/cluster_json.h"
#include "control/model/requests.h"

namespace edt::control {
namespace {

TEST(States, EverySpellingReadsBackToItsValue) {
  for (Phase p : {Phase::kPending, Phase::kCreating, Phase::kRunning, Phase::kScaling, Phase::kFailed,
                  Phase::kDeleting, Phase::kStopping, Phase::kDraining})
    EXPECT_EQ(parse_phase(to_string(p)), p) << to_string(p);
  for (JobState s : {JobState::kRunning, JobState::kSucceeded, JobState::kFailed})
    EXPECT_EQ(parse_job_state(to_string(s)), s) << to_string(s);
  for (EventType t : {EventType::kCreated, EventType::kScaling, EventType::kRunning, EventType::kFailed,
                      EventType::kRestarted, EventType::kDeleting, EventType::kDrained, EventType::kDrainTimedOut})
    EXPECT_EQ(parse_event_type(to_string(t)), t) << to_string(t);
}

TEST(States, SpellingsAreTheApis) {
  EXPECT_STREQ(to_string(Phase::kRunning), "Running");
  EXPECT_STREQ(to_string(JobState::kSucceeded), "Succeeded");
  EXPECT_STREQ(to_string(EventType::kRestarted), "Restarted");
  EXPECT_FALSE(parse_phase("running").has_value());
  EXPECT_FALSE(parse_job_state("").has_value());
  EXPECT_FALSE(parse_event_type("Deleted").has_value());
}

TEST(Requests, RefuseWrongShapesByFieldWithoutThrowing) {
  using nlohmann::json;
  VolumeRequest volume;
  EXPECT_EQ(parse_volume_request(json::object(), &volume).field(), "name");
  EXPECT_EQ(parse_volume_request(json{{"name", 7}}, &volume).field(), "name");
  EXPECT_EQ(parse_volume_request(json{{"name", "data"}, {"host_path", 3}}, &volume).field(), "host_path");
  ASSERT_TRUE(parse_volume_request(json{{"name", "data"}, {"host_path", "/srv"}}, &volume).is_ok());
  EXPECT_TRUE(volume.has_host_path);
  EXPECT_EQ(volume.host_path, "/srv");
  Image image;
  EXPECT_EQ(parse_image_request(json{{"name", "ds"}, {"root", 1}, {"frameworks", {"deepspeed"}}}, &image).field(), "root");
  EXPECT_EQ(parse_image_request(json{{"name", "ds"}, {"frameworks", {"caffe"}}}, &image).field(), "frameworks[0]");
  Image ds;
  ASSERT_TRUE(parse_image_request(json{{"name", "ds"}, {"frameworks", {"deepspeed"}}}, &ds).is_ok());
  EXPECT_EQ(ds.root, "/");
  std::string user;
  EXPECT_EQ(parse_user_request(json{{"name", "Bad_Name"}}, &user).code(), StatusCode::kInvalidArgument);
  JobRequest job;
  EXPECT_EQ(parse_job_request(json{{"command", ""}}, &job).field(), "command");
  EXPECT_EQ(parse_job_request(json{{"command", "id"}, {"container", 1}}, &job).field(), "container");
  ScaleRequest scale;
  EXPECT_EQ(parse_scale_request(json{{"framework", "slurm"}}, &scale).field(), "framework");
  EXPECT_EQ(parse_scale_request(json::object(), &scale).field(), "containers");
  EXPECT_EQ(parse_scale_request(json{{"containers", 3}, {"drain_timeout", "-1s"}}, &scale).field(), "drain_timeout");
  ASSERT_TRUE(parse_scale_request(json{{"containers", 3}}, &scale).is_ok());
  EXPECT_EQ(scale.containers, 3);
  EXPECT_FALSE(scale.drain_timeout.has_value());
  ASSERT_TRUE(parse_scale_request(json{{"containers", 2}, {"drain_timeout", "5m"}}, &scale).is_ok());
  EXPECT_EQ(scale.drain_timeout, std::chrono::minutes(5));
}

// One path for every body: the same refusal, by field, for a field the
// schema does not list, a wrong type and a missing field, whatever the resource.
TEST(Requests, EveryBodyRefusesUnknownFieldsAndWrongTypesAlike) {
  using nlohmann::json;
  auto refusal = [](auto parse, const json& body) -> Status {
    auto r = parse(body);
    EXPECT_FALSE(r.is_ok()) << body.dump();
    return r;
  };
  auto volume = [](const json& b) { VolumeRequest v; return parse_volume_request(b, &v); };
  auto image = [](const json& b) { Image i; return parse_image_request(b, &i); };
  auto user = [](const json& b) { std::string n; return parse_user_request(b, &n); };
  auto token = [](const json& b) { TokenRequest t; return parse_token_request(b, &t); };
  auto job = [](const json& b) { JobRequest j; return parse_job_request(b, &j); };
  auto scale = [](const json& b) { ScaleRequest s; return parse_scale_request(b, &s); };
  auto cluster = [](const json& b) { ClusterSpec c; return parse_cluster_spec(b, &c); };
  for (const Status& e : {refusal(volume, {{"name", "v"}, {"bogus", 1}}),
                         refusal(image, {{"name", "i"}, {"frameworks", {"horovod"}}, {"bogus", 1}}),
                         refusal(user, {{"name", "u"}, {"bogus", 1}}), refusal(token, {{"bogus", 1}}),
                         refusal(job, {{"command", "id"}, {"bogus", 1}}), refusal(scale, {{"containers", 2}, {"bogus", 1}}),
                         refusal(cluster, {{"name", "c"}, {"framework", "horovod"}, {"containers", 2}, {"bogus", 1}})}) {
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "bogus");
    EXPECT_EQ(e.message(), "unknown field 'bogus'");
  }
  EXPECT_EQ(refusal(image, {{"name", "i"}, {"root", 5}, {"frameworks", {"horovod"}}}).message(),
            "'root' must be a string, not a whole number");
  EXPECT_EQ(refusal(image, {{"name", "i"}, {"frameworks", "horovod"}}).message(), "'frameworks' must be a list, not a string");
  EXPECT_EQ(refusal(volume, {{"name", true}}).message(), "'name' must be a string, not a boolean");
  EXPECT_EQ(refusal(user, json::object()).message(), "'name' is missing");
  EXPECT_EQ(refusal(cluster, {{"name", "c"}, {"framework", "horovod"}, {"containers", 2}, {"mounts", {{{"volume", "v"}, {"read_only", "no"}}}}}).field(),
            "mounts[0].read_only");
  EXPECT_EQ(refusal(cluster, {{"name", "c"}, {"framework", "horovod"}, {"containers", 2}, {"gpu", {{"count", "1"}}}}).field(),
            "gpu.count");
  EXPECT_EQ(refusal(cluster, {{"name", "c"}, {"framework", "horovod"}, {"containers", 2}, {"env", {{"A", 1}}}}).field(),
            "env.A");
  EXPECT_EQ(refusal(token, json::array()).code(), StatusCode::kMalformed);
  // Integers past int64 are too large, not wrapped to negative.
  EXPECT_EQ(refusal(scale, {{"containers", uint64_t{1} << 63}}).message(),
            "containers is 9223372036854775808, more than 64");
  EXPECT_NE(refusal(scale, {{"containers", 2}, {"drain_timeout", uint64_t{1} << 63}}).message().find("longer than"),
            std::string::npos);
  EXPECT_EQ(refusal(cluster, {{"name", "c"}, {"framework", "horovod"}, {"containers", 2}, {"gpu", {{"count", uint64_t{1} << 63}}}})
                .message(),
            "'gpu.count' is 9223372036854775808, too large");
  TokenRequest none;
  EXPECT_TRUE(parse_token_request(json::object(), &none).is_ok());
  EXPECT_FALSE(none.expires_in.has_value());
}

TEST(Requests, ATokenLifetimeTakesTheContractsUnitsAndBounds) {
  using nlohmann::json;
  auto lifetime = [](const json& value) -> std::optional<int64_t> {
    TokenRequest t;
    if (!parse_token_request({{"expires_in", value}}, &t).is_ok()) return std::nullopt;
    return t.expires_in->count();
  };
  EXPECT_EQ(lifetime("90d"), 90 * 86400);
  EXPECT_EQ(lifetime("12h"), 12 * 3600);
  EXPECT_EQ(lifetime("30m"), 1800);
  EXPECT_EQ(lifetime("45s"), 45);
  EXPECT_EQ(lifetime("45"), 45);
  EXPECT_EQ(lifetime(3600), 3600);
  EXPECT_EQ(lifetime("365d"), 365 * 86400);
  for (const json& bad : {json("366d"), json("0s"), json(0), json(-5), json("-5s"), json("5y"), json("d"), json(""),
                          json("1.5d"), json("9999999999999d"), json("999999999999d"), json(uint64_t{1} << 63), json(true), json::array()}) {
    TokenRequest t;
    auto r = parse_token_request({{"expires_in", bad}}, &t);
    ASSERT_FALSE(r.is_ok()) << bad.dump();
    EXPECT_EQ(r.field(), "expires_in") << bad.dump();
    EXPECT_EQ(r.code(), StatusCode::kInvalidArgument) << bad.dump();
  }
  TokenRequest described;
  EXPECT_TRUE(parse_token_request({{"description", "ci runner"}}, &described).is_ok());
  EXPECT_EQ(described.description, "ci runner");
  EXPECT_EQ(parse_token_request({{"description", std::string(201, 'x')}}, &described).field(), "description");
  EXPECT_EQ(parse_token_request({{"description", 5}}, &described).field(), "description");
}

}  // namespace
}  // namespace edt::control
