// Checks that a schedule is a correct program before anything runs or replays it: the list is
// acyclic and its order is an execution order; every wait follows its start; every use of data
// follows what produced it and every overwrite follows its last use (including a gather from a
// secondary copy after the copy was made, every gradient reduction before the boundary, the
// update before the next step's gathers); memory freed was allocated, and nothing leaks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/step_schedule.hpp"

namespace strata {

struct ScheduleCheck {
  std::vector<std::string> problems;  // one sentence each; empty when the schedule is valid
  bool ok() const { return problems.empty(); }
};

ScheduleCheck validate_schedule(const StepSchedule& schedule);

// Throws strata::InternalError listing the first problems: a schedule the builder made is wrong.
void require_valid_schedule(const StepSchedule& schedule, std::string_view what);

}  // namespace strata
