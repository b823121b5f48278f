#include "control/model/states.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(parse_volume_request(json::object(), &volume)->field, "name");
  EXPECT_EQ(parse_volume_request(json{{"name", 7}}, &volume)->field, "name");
  ASSERT_FALSE(parse_volume_request(json{{"name", "data"}, {"host_path", 3}}, &volume).has_value());
  EXPECT_TRUE(volume.has_host_path);
  EXPECT_EQ(volume.host_path, "");
  Image image;
  EXPECT_EQ(parse_image_request(json{{"name", "ds"}, {"root", 1}, {"frameworks", {"deepspeed"}}}, &image)->field, "root");
  EXPECT_EQ(parse_image_request(json{{"name", "ds"}, {"frameworks", {"caffe"}}}, &image)->field, "frameworks");
  Image ds;
  ASSERT_FALSE(parse_image_request(json{{"name", "ds"}, {"frameworks", {"deepspeed"}}}, &ds).has_value());
  EXPECT_EQ(ds.root, "/");
  std::string user;
  EXPECT_EQ(parse_user_request(json{{"name", "Bad_Name"}}, &user)->kind, Error::Kind::kInvalid);
  JobRequest job;
  EXPECT_EQ(parse_job_request(json{{"command", ""}}, &job)->field, "command");
  EXPECT_EQ(parse_job_request(json{{"command", "id"}, {"container", 1}}, &job)->field, "container");
  ScaleRequest scale;
  EXPECT_EQ(parse_scale_request(json{{"framework", "slurm"}}, &scale)->field, "framework");
  EXPECT_EQ(parse_scale_request(json::object(), &scale)->field, "containers");
  EXPECT_EQ(parse_scale_request(json{{"containers", 3}, {"drain_timeout", "-1s"}}, &scale)->field, "drain_timeout");
  ASSERT_FALSE(parse_scale_request(json{{"containers", 3}}, &scale).has_value());
  EXPECT_EQ(scale.containers, 3);
  EXPECT_FALSE(scale.drain_timeout.has_value());
  ASSERT_FALSE(parse_scale_request(json{{"containers", 2}, {"drain_timeout", "5m"}}, &scale).has_value());
  EXPECT_EQ(scale.drain_timeout, std::chrono::minutes(5));
}

}  // namespace
}  // namespace edt::control
