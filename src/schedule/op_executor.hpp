// The replay interface: anything that can carry out a schedule's ops one at a time. The sharded
// engine executes them on real buffers and collectives; the counting executor tallies bytes,
// FLOPs and live memory; a simulator prices them on a cost model. All replay the same list.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "schedule/step_schedule.hpp"

namespace strata {

// What the call that runs a segment gives its ops (a micro-batch's tokens, the loss scale, the
// stop request) and what they answer (the losses, the norm, the stop agreement), carried through
// every op of the segment. Executors that count or price ops leave it alone.
struct OpContext {
  std::span<const std::int32_t> tokens, targets;
  float loss_scale = 1.0f;     // already divided by the world size (the reductions are sums)
  bool stop_requested = false;  // this rank's, for the stop agreement
  float local_loss = 0.0f;      // this rank's loss of the micro-batch (head forward, for the reduction)
  double loss = 0.0;            // the micro-batch loss's mean over every rank (loss reduction)
  double norm = 0.0;            // the global gradient norm (boundary reduction)
  bool stop = false;            // whether any rank asked to stop (update)
};

class OpExecutor {
 public:
  virtual ~OpExecutor() = default;
  virtual void execute(const ScheduleOp& op, OpContext& context) = 0;
  // An op with nothing to give or answer (a count, a replay, a test's hand-made op).
  void execute(const ScheduleOp& op) {
    OpContext none;
    execute(op, none);
  }
};

// The op indices of one segment in the order to run them: the list order, or (shuffle_seed != 0)
// a seeded random order that respects every dependency. Every rank that uses the same seed gets
// the same order, so collectives still line up across ranks. Dependencies on ops of earlier
// segments count as met.
std::vector<int> segment_order(const StepSchedule& schedule, int segment, std::uint64_t shuffle_seed);

// Runs every op of the segment through the executor in segment_order's order, with one context.
void run_segment(const StepSchedule& schedule, int segment, OpExecutor& executor, OpContext& context,
                 std::uint64_t shuffle_seed = 0);

// Runs the whole list in order (the counting executor and the simulator use this).
void run_all(const StepSchedule& schedule, OpExecutor& executor);

}  // namespace strata
