// Parallel, vectorized residual-stream helpers.
#include "model/cpu/elementwise.hpp"

#include "core/op_profile.hpp"

namespace strata::cpu {

void add(float* out, const float* a, const float* b, std::size_t n) {
  const OpScope scope(Op::kResidual, 12.0 * static_cast<double>(n));
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void copy(float* out, const float* in, std::size_t n) {
  const OpScope scope(Op::kResidual, 8.0 * static_cast<double>(n));
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) out[i] = in[i];
}

}  // namespace strata::cpu
