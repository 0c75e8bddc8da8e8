// Warmup + cosine learning-rate schedule.
#include "optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace strata {

double LrSchedule::at(int step) const {
  if (step < warmup_steps) return peak * (step + 1) / warmup_steps;
  const double min_lr = peak * min_lr_ratio;
  const int decay_steps = std::max(1, total_steps - warmup_steps);
  const double progress = std::clamp(static_cast<double>(step - warmup_steps) / decay_steps, 0.0, 1.0);
  return min_lr + 0.5 * (peak - min_lr) * (1.0 + std::cos(3.14159265358979323846 * progress));
}

}  // namespace strata
