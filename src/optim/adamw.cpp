// AdamW kernels: one fused, vectorized, parallel pass over parameters, gradients and moments.
#include "optim/adamw.hpp"

#include <cmath>

namespace strata {

void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n, const AdamWHyper& hyper,
                  float lr, int step, float grad_scale, bool decay) {
  const float b1 = hyper.beta1, b2 = hyper.beta2, eps = hyper.eps;
  const float decay_factor = decay ? 1.0f - lr * hyper.weight_decay : 1.0f;
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(b1), step);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(b2), step);
  const float step_size = static_cast<float>(lr / bias_correction1);
  const float inv_bc2_sqrt = static_cast<float>(1.0 / std::sqrt(bias_correction2));
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grad[i] * grad_scale;
    const float mi = m[i] * b1 + (1.0f - b1) * g;
    const float vi = v[i] * b2 + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) * inv_bc2_sqrt + eps;
    param[i] = param[i] * decay_factor - step_size * mi / denom;
  }
}

void adamw_update_unit_slice(const UnitLayout& unit, Range slice, float* param, const float* grad, float* m,
                             float* v, const AdamWHyper& hyper, float lr, int step, float grad_scale) {
  for (const TensorSpec& t : unit.tensors) {
    const Range part = t.range.intersect(slice);
    if (part.empty()) continue;
    const std::size_t off = part.begin - slice.begin;
    adamw_update(param + off, grad + off, m + off, v + off, part.size(), hyper, lr, step, grad_scale,
                 t.weight_decay);
  }
}

}  // namespace strata
