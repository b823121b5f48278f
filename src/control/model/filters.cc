#include "control/model/filters.h"

#include <array>
#include <ctime>
#include <initializer_list>

namespace edt::control {

namespace {

// Refuses a parameter outside `known`, and one given more than once.
Status check_names(const QueryParams& params, std::initializer_list<std::string_view> known) {
  std::string names;
  for (auto name : known) names += (names.empty() ? "" : ", ") + std::string(name);
  for (const auto& [key, value] : params) {
    bool read = false;
    for (auto name : known) read = read || key == name;
    if (!read) return malformed(key, "the query parameter '" + key + "' is not read here", "use only " + names);
    if (params.count(key) > 1)
      return malformed(key, "the query parameter '" + key + "' is given more than once", "give it once");
  }
  return Status::ok();
}

template <typename T, size_t N>
std::string choices(const std::array<T, N>& all) {
  std::string out;
  for (const auto& value : all) out += (out.empty() ? "" : ", ") + std::string(to_string(value));
  return out;
}

bool digits(std::string_view text, size_t from, size_t count) {
  for (size_t i = from; i < from + count; ++i)
    if (text[i] < '0' || text[i] > '9') return false;
  return true;
}

int number(std::string_view text, size_t from, size_t count) {
  int n = 0;
  for (size_t i = from; i < from + count; ++i) n = n * 10 + (text[i] - '0');
  return n;
}

constexpr std::array kEventTypes = {EventType::kCreated,  EventType::kScaling,  EventType::kRunning,
                                    EventType::kFailed,   EventType::kRestarted, EventType::kDeleting,
                                    EventType::kDrained,  EventType::kDrainTimedOut, EventType::kQueued,
                                    EventType::kScheduled};
constexpr std::array kJobStates = {JobState::kRunning, JobState::kSucceeded, JobState::kFailed};

}  // namespace

std::optional<int64_t> parse_utc_time_ms(std::string_view t) {
  const bool with_ms = t.size() == 24 && t[19] == '.' && digits(t, 20, 3);
  if (!(t.size() == 20 || with_ms) || t.back() != 'Z') return std::nullopt;
  if (!digits(t, 0, 4) || t[4] != '-' || !digits(t, 5, 2) || t[7] != '-' || !digits(t, 8, 2) || t[10] != 'T' ||
      !digits(t, 11, 2) || t[13] != ':' || !digits(t, 14, 2) || t[16] != ':' || !digits(t, 17, 2))
    return std::nullopt;
  std::tm tm{};
  tm.tm_year = number(t, 0, 4) - 1900;
  tm.tm_mon = number(t, 5, 2) - 1;
  tm.tm_mday = number(t, 8, 2);
  tm.tm_hour = number(t, 11, 2);
  tm.tm_min = number(t, 14, 2);
  tm.tm_sec = number(t, 17, 2);
  const std::tm asked = tm;
  const std::time_t seconds = timegm(&tm);
  // timegm normalises 2026-02-30 to March: a date that moved was not real.
  if (tm.tm_mday != asked.tm_mday || tm.tm_mon != asked.tm_mon || tm.tm_hour != asked.tm_hour ||
      tm.tm_min != asked.tm_min || tm.tm_sec != asked.tm_sec)
    return std::nullopt;
  return static_cast<int64_t>(seconds) * 1000 + (with_ms ? number(t, 20, 3) : 0);
}

bool EventFilter::matches(const ClusterEvent& event) const {
  return (!type || event.type == *type) && (!since_ms || event.time_ms >= *since_ms);
}

bool JobFilter::matches(const Job& job) const {
  return (!state || job.state == *state) && (!container || job.container == *container);
}

Status parse_event_filter(const QueryParams& params, EventFilter* out) {
  EDT_RETURN_IF_ERROR(check_names(params, {"type", "since"}));
  if (auto it = params.find("type"); it != params.end()) {
    out->type = parse_event_type(it->second);
    if (!out->type)
      return malformed("type", "'" + it->second + "' is not an event type", "use one of " + choices(kEventTypes));
  }
  if (auto it = params.find("since"); it != params.end()) {
    out->since_ms = parse_utc_time_ms(it->second);
    if (!out->since_ms)
      return malformed("since", "'" + it->second + "' is not a UTC time",
                       "give it as an event's time is written, e.g. 2026-12-01T10:00:00.000Z or 2026-12-01T10:00:00Z");
  }
  return Status::ok();
}

Status parse_job_filter(const QueryParams& params, JobFilter* out) {
  EDT_RETURN_IF_ERROR(check_names(params, {"state", "container"}));
  if (auto it = params.find("state"); it != params.end()) {
    out->state = parse_job_state(it->second);
    if (!out->state)
      return malformed("state", "'" + it->second + "' is not a job state", "use one of " + choices(kJobStates));
  }
  if (auto it = params.find("container"); it != params.end()) {
    if (!check_resource_name(it->second, "container", "container").is_ok())
      return malformed("container", "'" + it->second + "' is not a container name",
                       "give a container's name as the cluster lists it, e.g. tthvd-worker-0");
    out->container = it->second;
  }
  return Status::ok();
}

}  // namespace edt::control
