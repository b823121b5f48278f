#include "control/model/filters.h"

#include <gtest/gtest.h>

namespace edt::control {
namespace {

TEST(UtcTime, ReadsEventTimesWithAndWithoutMilliseconds) {
  EXPECT_EQ(parse_utc_time_ms("1970-01-01T00:00:01.250Z"), 1250);
  EXPECT_EQ(parse_utc_time_ms("2026-12-01T10:00:00Z"), int64_t{1796119200} * 1000);
  EXPECT_EQ(parse_utc_time_ms("2024-02-29T00:00:00Z"), int64_t{1709164800} * 1000);
}

TEST(UtcTime, RefusesWhatIsNotARealUtcTime) {
  for (const char* text : {"", "yesterday", "2026-12-01", "2026-12-01T10:00:00", "2026-12-01T10:00:00+01:00",
                           "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-12-01T24:00:00Z",
                           "2026-12-01T10:00:00.5Z", "2026-12-01 10:00:00Z", "+026-12-01T10:00:00Z"})
    EXPECT_FALSE(parse_utc_time_ms(text)) << text;
}

TEST(EventFilter, SelectsByTypeAndSince) {
  EventFilter filter;
  ASSERT_TRUE(parse_event_filter({{"type", "Scaling"}, {"since", "1970-01-01T00:00:02.000Z"}}, &filter).is_ok());
  EXPECT_TRUE(filter.matches({2000, EventType::kScaling, "at"}));
  EXPECT_FALSE(filter.matches({1999, EventType::kScaling, "before"}));
  EXPECT_FALSE(filter.matches({3000, EventType::kRunning, "another type"}));
  EventFilter all;
  ASSERT_TRUE(parse_event_filter({}, &all).is_ok());
  EXPECT_TRUE(all.matches({0, EventType::kFailed, ""}));
}

TEST(EventFilter, RefusesBadValuesNamingTheParameter) {
  EventFilter filter;
  auto refused = parse_event_filter({{"type", "scaling"}}, &filter);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.code(), StatusCode::kMalformed);
  EXPECT_EQ(refused.field(), "type");
  EXPECT_NE(refused.fix().find("DrainTimedOut"), std::string::npos) << refused.fix();
  EXPECT_EQ(parse_event_filter({{"since", "now"}}, &filter).field(), "since");
  EXPECT_EQ(parse_event_filter({{"state", "Running"}}, &filter).field(), "state");
  EXPECT_EQ(parse_event_filter({{"type", "Failed"}, {"type", "Running"}}, &filter).field(), "type");
}

TEST(JobFilter, SelectsByStateAndContainer) {
  JobFilter filter;
  ASSERT_TRUE(parse_job_filter({{"state", "Failed"}, {"container", "c-worker-0"}}, &filter).is_ok());
  Job job;
  job.state = JobState::kFailed;
  job.container = "c-worker-0";
  EXPECT_TRUE(filter.matches(job));
  job.container = "c-launcher";
  EXPECT_FALSE(filter.matches(job));
  job.container = "c-worker-0";
  job.state = JobState::kRunning;
  EXPECT_FALSE(filter.matches(job));
}

TEST(JobFilter, RefusesBadValuesNamingTheParameter) {
  JobFilter filter;
  auto refused = parse_job_filter({{"state", "done"}}, &filter);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.field(), "state");
  EXPECT_NE(refused.fix().find("Succeeded"), std::string::npos) << refused.fix();
  EXPECT_EQ(parse_job_filter({{"container", "../etc"}}, &filter).field(), "container");
  EXPECT_EQ(parse_job_filter({{"container", ""}}, &filter).field(), "container");
  EXPECT_EQ(parse_job_filter({{"type", "Failed"}}, &filter).field(), "type");
}

}  // namespace
}  // namespace edt::control
