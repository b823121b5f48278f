#include "control/model/states.h"

#include <array>
#include <utility>

namespace edt::control {
namespace {

// One table per enum: the spelling of each value, in the enum's order.
constexpr std::array kPhaseNames = {"Pending", "Creating", "Running", "Scaling", "Failed", "Deleting", "Stopping", "Draining"};
constexpr std::array kJobStateNames = {"Running", "Succeeded", "Failed"};
constexpr std::array kEventTypeNames = {"Created", "Scaling", "Running", "Failed", "Restarted", "Deleting", "Drained",
                                         "DrainTimedOut", "Queued", "Scheduled"};

template <typename Enum, size_t N>
std::optional<Enum> parse(const std::array<const char*, N>& names, std::string_view text) {
  for (size_t i = 0; i < N; ++i)
    if (text == names[i]) return static_cast<Enum>(i);
  return std::nullopt;
}

}  // namespace

const char* to_string(Phase phase) { return kPhaseNames[static_cast<size_t>(phase)]; }
const char* to_string(JobState state) { return kJobStateNames[static_cast<size_t>(state)]; }
const char* to_string(EventType type) { return kEventTypeNames[static_cast<size_t>(type)]; }

std::optional<Phase> parse_phase(std::string_view text) { return parse<Phase>(kPhaseNames, text); }
std::optional<JobState> parse_job_state(std::string_view text) { return parse<JobState>(kJobStateNames, text); }
std::optional<EventType> parse_event_type(std::string_view text) { return parse<EventType>(kEventTypeNames, text); }

}  // namespace edt::control
