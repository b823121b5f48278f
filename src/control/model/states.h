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

// kDraining (a container's only): out of the hostfile on scale-down, kept
// running until the workers of edtrun jobs in it have left (reconciler.h).
enum class Phase { kPending, kCreating, kRunning, kScaling, kFailed, kDeleting, kStopping, kDraining };
enum class JobState { kRunning, kSucceeded, kFailed };
// kDrained: a draining container's workers left; kDrainTimedOut: its drain
// deadline passed with workers still in it. kQueued: a create or scale waits
// for GPUs; kScheduled: the scheduler placed a queued request, grew an
// elastic cluster, or took borrowed containers back.
enum class EventType {
  kCreated, kScaling, kRunning, kFailed, kRestarted, kDeleting, kDrained, kDrainTimedOut, kQueued, kScheduled
};

const char* to_string(Phase phase);
const char* to_string(JobState state);
const char* to_string(EventType type);

std::optional<Phase> parse_phase(std::string_view text);
std::optional<JobState> parse_job_state(std::string_view text);
std::optional<EventType> parse_event_type(std::string_view text);

}  // namespace edt::control
