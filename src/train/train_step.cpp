// The optimizer step shared by the trainer and the reference tests.
#include "train/train_step.hpp"

#include <cmath>

#include "optim/grad_norm.hpp"

namespace strata {

StepOutcome train_step(TrainingEngine& engine, const StepRecipe& recipe, int step, const MicroBatchSource& fill,
                       std::span<std::int32_t> inputs, std::span<std::int32_t> targets) {
  StepOutcome outcome;
  engine.zero_grad();
  const float loss_scale = 1.0f / static_cast<float>(recipe.grad_accum);
  for (int micro = 0; micro < recipe.grad_accum; ++micro) {
    fill(micro, inputs, targets);
    outcome.loss += engine.forward_backward(inputs, targets, loss_scale) / static_cast<double>(recipe.grad_accum);
  }
  outcome.grad_norm = engine.grad_norm();
  outcome.lr = recipe.schedule.at(step);
  if (!std::isfinite(outcome.loss) || !std::isfinite(outcome.grad_norm)) {
    outcome.nonfinite = true;
    return outcome;
  }
  engine.optimizer_step(recipe.hyper, outcome.lr, step + 1, clip_coefficient(outcome.grad_norm, recipe.grad_clip));
  return outcome;
}

}  // namespace strata
