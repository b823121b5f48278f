// Filters: what the query parameters of the list routes select.
//
//   GET /clusters/{name}/events   type=<EventType>  since=<UTC time, as an
//                                 event's "time": 2026-12-01T10:00:00.000Z,
//                                 the milliseconds optional> (events at or
//                                 after it)
//   GET /clusters/{name}/jobs     state=<JobState>  container=<container name>
//
// Each parameter may be given once; a parameter the route does not read, one
// given twice, or a value that is not one of its kind is refused (kMalformed,
// 400) naming the parameter, the value and the values it takes. No
// parameter selects everything.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "control/model/cluster.h"
#include "control/model/error.h"
#include "control/model/job.h"

namespace edt::control {

using QueryParams = std::multimap<std::string, std::string>;

struct EventFilter {
  std::optional<EventType> type;
  std::optional<int64_t> since_ms;  // unix milliseconds
  bool matches(const ClusterEvent& event) const;
};

struct JobFilter {
  std::optional<JobState> state;
  std::optional<std::string> container;
  bool matches(const Job& job) const;
};

Status parse_event_filter(const QueryParams& params, EventFilter* out);
Status parse_job_filter(const QueryParams& params, JobFilter* out);

// "YYYY-MM-DDTHH:MM:SS[.mmm]Z" as unix milliseconds; nullopt when it is not
// one, or not a real date and time.
std::optional<int64_t> parse_utc_time_ms(std::string_view text);

}  // namespace edt::control
