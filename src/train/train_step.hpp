// One optimizer step, the same for every engine: accumulate micro-batches, measure the global
// gradient norm, clip, look up the learning rate, update.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "optim/lr_schedule.hpp"
#include "engine/training_engine.hpp"

namespace strata {

struct StepRecipe {
  LrSchedule schedule;
  AdamWHyper hyper;
  double grad_clip = 1.0;  // 0: off
  int grad_accum = 1;
};

struct StepOutcome {
  double loss = 0.0;       // mean over the micro-batches
  double grad_norm = 0.0;  // before clipping
  double lr = 0.0;
  // The loss or the gradient norm was NaN or infinite: the update was not applied, so the weights
  // and moments are those of the step before (the caller stops the run).
  bool nonfinite = false;
  // Some rank was asked to stop after this step (agreed by every rank within the step).
  bool stop = false;
};

// fill(micro, inputs, targets) supplies micro-batch `micro` of this step.
using MicroBatchSource =
    std::function<void(int micro, std::span<std::int32_t> inputs, std::span<std::int32_t> targets)>;

// step counts from 0. A non-finite loss or gradient norm (the same on every rank: both are
// reduced) skips the update and says so in the outcome. stop_requested is asked just before the
// update, so a request during the step stops the run after it.
StepOutcome train_step(TrainingEngine& engine, const StepRecipe& recipe, int step, const MicroBatchSource& fill,
                       std::span<std::int32_t> inputs, std::span<std::int32_t> targets,
                       const std::function<bool()>& stop_requested = {});

class Communicator;
// Trains warmup + steps steps on random tokens (seeded by rank), a barrier around each so the
// slowest rank's time is what counts, and returns the seconds of each measured step on this rank.
// Collective. What benchmarks and calibration time a step with.
std::vector<double> step_seconds(TrainingEngine& engine, Communicator& comm, int vocab, int batch, int seq_len,
                                 int grad_accum, int steps, int warmup);
// Their median.
double median_step_seconds(TrainingEngine& engine, Communicator& comm, int vocab, int batch, int seq_len, int grad_accum,
                           int steps, int warmup);

}  // namespace strata
