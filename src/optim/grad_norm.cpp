// Gradient-norm helpers.
#include "optim/grad_norm.hpp"

namespace strata {

double sum_of_squares(const float* values, std::size_t n) {
  // Runs of 1024 summed in fp32 (16 lanes of 64 terms each: relative error about 64 * 2^-24),
  // the runs in double: twice the vector width of an all-double sum, at memory speed.
  constexpr std::size_t kRun = 1024;
  const std::size_t runs = (n + kRun - 1) / kRun;
  double total = 0.0;
#pragma omp parallel for reduction(+ : total) schedule(static)
  for (std::size_t r = 0; r < runs; ++r) {
    const float* x = values + r * kRun;
    const std::size_t len = r + 1 == runs ? n - r * kRun : kRun;
    float run = 0.0f;
#pragma omp simd reduction(+ : run)
    for (std::size_t i = 0; i < len; ++i) run += x[i] * x[i];
    total += run;
  }
  return total;
}

float clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  const double coefficient = max_norm / (norm + 1e-6);
  return coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
}

}  // namespace strata
