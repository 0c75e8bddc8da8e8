// A testing aid for the job-wide abort (STRATA_INJECT_FAILURE=rank:step): one rank throws in the
// backward of the last block at one optimizer step, where the next block's gather is already in
// flight, so the test sees a failure with collectives outstanding. Checked before each op runs,
// outside the compute itself.
#pragma once

#include "core/error.hpp"
#include "schedule/step_schedule.hpp"

namespace strata {

struct InjectedFailure {
  int rank = -1;   // -1: off
  int step = -1;   // 0-based, as the training run counts them (steps before a resume included)
  int layer = -1;  // the block whose backward fails: the last

  void before(const ScheduleOp& op, int this_rank, int this_step) const {
    STRATA_REQUIRE(!(rank >= 0 && this_rank == rank && this_step == step && op.kind == OpKind::kBackward &&
                     op.stage == ComputeStage::kBlock && op.layer == layer),
                   "injected failure (STRATA_INJECT_FAILURE={}:{}) in the backward of block {}", rank, step, op.layer);
  }
};

}  // namespace strata
