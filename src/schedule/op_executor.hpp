// The replay interface: anything that can carry out a schedule's ops one at a time. The sharded
// engine executes them on real buffers and collectives; the counting executor tallies bytes,
// FLOPs and live memory; a simulator prices them on a cost model. All replay the same list.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/step_schedule.hpp"

namespace strata {

class OpExecutor {
 public:
  virtual ~OpExecutor() = default;
  virtual void execute(const ScheduleOp& op) = 0;
};

// The op indices of one segment in the order to run them: the list order, or (shuffle_seed != 0)
// a seeded random order that respects every dependency. Every rank that uses the same seed gets
// the same order, so collectives still line up across ranks. Dependencies on ops of earlier
// segments count as met.
std::vector<int> segment_order(const StepSchedule& schedule, int segment, std::uint64_t shuffle_seed);

// Runs every op of the segment through the executor in segment_order's order.
void run_segment(const StepSchedule& schedule, int segment, OpExecutor& executor, std::uint64_t shuffle_seed = 0);

// Runs the whole list in order (the counting executor and the simulator use this).
void run_all(const StepSchedule& schedule, OpExecutor& executor);

}  // namespace strata
