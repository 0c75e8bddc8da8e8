// LayerNorm over the last dimension (eps 1e-5, biased variance, as torch.nn.LayerNorm).
#pragma once

#include "model/cpu/grad_write.hpp"

namespace strata::cpu {

// out = (inp - mean) * rstd * weight + bias per row; mean and rstd are kept for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int rows, int channels);

// dinp += d/dinp (the residual stream's gradient adds up); dweight and dbias are added to, or
// written under GradWrite::kOverwrite.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int rows, int channels,
                        GradWrite write = GradWrite::kAccumulate);

}  // namespace strata::cpu
