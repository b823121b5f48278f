// The states edtd records, as enums with one spelling each. The spelling is
// what the API returns and what the database stores; parse_*() reads it
// back and returns nullopt for anything else.
//
//   Phase      of a cluster and of each of its containers
//   JobState   of a command run in a container
//   EventType  of a cluster's event list (what happened, for people)
#pragma once

#include <optional>
#include <string_view>

namespace edt::control {

enum class Phase { kPending, kCreating, kRunning, kScaling, kFailed, kDeleting, kStopping };
enum class JobState { kRunning, kSucceeded, kFailed };
enum class EventType { kCreated, kScaling, kRunning, kFailed, kRestarted, kDeleting };

const char* to_string(Phase phase);
const char* to_string(JobState state);
const char* to_string(EventType type);

std::optional<Phase> parse_phase(std::string_view text);
std::optional<JobState> parse_job_state(std::string_view text);
std::optional<EventType> parse_event_type(std::string_view text);

}  // namespace edt::control
