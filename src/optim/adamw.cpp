// AdamW kernels: one fused, vectorized, parallel pass over parameters, gradients and moments (and
// the bf16 working copy where there is one).
#include "optim/adamw.hpp"

#include <cmath>

namespace strata {

namespace {

// The update of one element; returns the new parameter.
struct AdamWStep {
  float b1, b2, eps, decay_factor, step_size, inv_bc2_sqrt, grad_scale;
  float operator()(float& param, float grad, float& m, float& v) const {
    const float g = grad * grad_scale;
    const float mi = m * b1 + (1.0f - b1) * g;
    const float vi = v * b2 + (1.0f - b2) * g * g;
    m = mi;
    v = vi;
    const float denom = std::sqrt(vi) * inv_bc2_sqrt + eps;
    param = param * decay_factor - step_size * mi / denom;
    return param;
  }
};

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n, const AdamWHyper& hyper,
                  float lr, int step, float grad_scale, bool decay, bf16* param_bf16) {
  const float b1 = hyper.beta1, b2 = hyper.beta2, eps = hyper.eps;
  const float decay_factor = decay ? 1.0f - lr * hyper.weight_decay : 1.0f;
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(b1), step);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(b2), step);
  const float step_size = static_cast<float>(lr / bias_correction1);
  const float inv_bc2_sqrt = static_cast<float>(1.0 / std::sqrt(bias_correction2));
  const AdamWStep update{b1, b2, eps, decay_factor, step_size, inv_bc2_sqrt, grad_scale};
  if (param_bf16 == nullptr) {
#pragma omp parallel for simd schedule(static)
    for (std::size_t i = 0; i < n; ++i) update(param[i], grad[i], m[i], v[i]);
  } else {
#pragma omp parallel for simd schedule(static)
    for (std::size_t i = 0; i < n; ++i) param_bf16[i] = to_bf16(update(param[i], grad[i], m[i], v[i]));
  }
}

void adamw_update_unit_slice(const UnitLayout& unit, Range slice, float* param, const float* grad, float* m,
                             float* v, const AdamWHyper& hyper, float lr, int step, float grad_scale,
                             bf16* param_bf16) {
  for (const TensorSpec& t : unit.tensors) {
    const Range part = t.range.intersect(slice);
    if (part.empty()) continue;
    const std::size_t off = part.begin - slice.begin;
    adamw_update(param + off, grad + off, m + off, v + off, part.size(), hyper, lr, step, grad_scale,
                 t.weight_decay, param_bf16 == nullptr ? nullptr : param_bf16 + off);
  }
}

}  // namespace strata
