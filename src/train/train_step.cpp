// The optimizer step shared by the trainer and the reference tests.
#include "train/train_step.hpp"

#include <cmath>
#include <vector>

#include "comm/communicator.hpp"
#include "core/median.hpp"
#include "core/rng.hpp"
#include "core/stopwatch.hpp"
#include "optim/grad_norm.hpp"

namespace strata {

StepOutcome train_step(TrainingEngine& engine, const StepRecipe& recipe, int step, const MicroBatchSource& fill,
                       std::span<std::int32_t> inputs, std::span<std::int32_t> targets,
                       const std::function<bool()>& stop_requested) {
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
  const UpdateOperands update{recipe.hyper, outcome.lr, step + 1, clip_coefficient(outcome.grad_norm, recipe.grad_clip),
                              stop_requested && stop_requested()};
  outcome.stop = engine.optimizer_step(update);
  return outcome;
}

std::vector<double> step_seconds(TrainingEngine& engine, Communicator& comm, int vocab, int batch, int seq_len,
                                 int grad_accum, int steps, int warmup) {
  const std::size_t n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(seq_len);
  std::vector<std::int32_t> in(n), tgt(n);
  Rng rng(static_cast<std::uint64_t>(comm.rank()) + 1);
  const StepRecipe recipe{LrSchedule{1e-4, 0, steps + warmup, 1.0}, AdamWHyper{}, 1.0, grad_accum};
  auto fill = [&](int, std::span<std::int32_t> a, std::span<std::int32_t> b) {
    for (auto& x : a) x = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
    for (auto& x : b) x = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  };
  std::vector<double> seconds;
  for (int step = 0; step < warmup + steps; ++step) {
    comm.barrier();
    Stopwatch watch;
    train_step(engine, recipe, step, fill, in, tgt);
    comm.barrier();
    if (step >= warmup) seconds.push_back(watch.seconds());
  }
  return seconds;
}

double median_step_seconds(TrainingEngine& engine, Communicator& comm, int vocab, int batch, int seq_len, int grad_accum,
                           int steps, int warmup) {
  return median(step_seconds(engine, comm, vocab, batch, seq_len, grad_accum, steps, warmup));
}

}  // namespace strata
