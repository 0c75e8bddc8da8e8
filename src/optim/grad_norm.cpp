// Gradient-norm helpers.
#include "optim/grad_norm.hpp"

namespace strata {

double sum_of_squares(const float* values, std::size_t n) {
  double total = 0.0;
#pragma omp parallel for simd reduction(+ : total) schedule(static)
  for (std::size_t i = 0; i < n; ++i) total += static_cast<double>(values[i]) * values[i];
  return total;
}

float clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  const double coefficient = max_norm / (norm + 1e-6);
  return coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
}

}  // namespace strata
