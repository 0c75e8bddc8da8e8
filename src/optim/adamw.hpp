// AdamW with decoupled weight decay, element for element as torch.optim.AdamW (PyTorch 1.13).
#pragma once

#include <cstddef>

#include "core/bf16.hpp"
#include "core/range.hpp"
#include "model/parameter_layout.hpp"

namespace strata {

struct AdamWHyper {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// What one update moves per element: parameter, gradient and both moments read, parameter and
// moments written, and the bf16 working copy written where there is one.
constexpr double adamw_bytes_per_element(bool working_copy) {
  return 7.0 * sizeof(float) + (working_copy ? static_cast<double>(sizeof(bf16)) : 0.0);
}

// One update of n elements in place. step counts from 1; grad_scale multiplies each gradient
// first (the clipping coefficient). param_bf16, where given, receives to_bf16 of each updated
// parameter in the same pass (the bf16 working copy, kept without reading the weights again).
void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n, const AdamWHyper& hyper,
                  float lr, int step, float grad_scale, bool decay, bf16* param_bf16 = nullptr);

// Updates the elements [slice.begin, slice.end) of a unit; the pointers address element
// slice.begin. Weight decay applies where the unit's tensors ask for it; elements past the
// unit's end (shard padding) are left alone.
void adamw_update_unit_slice(const UnitLayout& unit, Range slice, float* param, const float* grad, float* m,
                             float* v, const AdamWHyper& hyper, float lr, int step, float grad_scale,
                             bf16* param_bf16 = nullptr);

}  // namespace strata
