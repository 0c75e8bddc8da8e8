// Learning rate: linear warmup, then cosine decay to min_lr_ratio * peak at the last step.
#pragma once

namespace strata {

struct LrSchedule {
  double peak = 6e-4;
  int warmup_steps = 0;
  int total_steps = 1;
  double min_lr_ratio = 0.1;

  // step counts from 0. warmup: peak * (step + 1) / warmup_steps; then
  // min + (peak - min) * (1 + cos(pi * progress)) / 2 with progress 0 at the end of warmup and 1
  // at total_steps.
  double at(int step) const;
};

}  // namespace strata
