// Global gradient norm and the clipping coefficient of torch.nn.utils.clip_grad_norm_.
#pragma once

#include <cstddef>

namespace strata {

// Sum of squares of n values, accumulated in double.
double sum_of_squares(const float* values, std::size_t n);

// min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0 (clipping off).
float clip_coefficient(double norm, double max_norm);

}  // namespace strata
