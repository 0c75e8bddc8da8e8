// A linear layer as torch.nn.Linear: out = inp W^T + b, with W stored (out_features, in_features).
#pragma once

#include "core/bf16.hpp"
#include "model/cpu/grad_write.hpp"

namespace strata::cpu {

// out(rows x oc) = inp(rows x c) W(oc x c)^T + bias(oc); bias may be null. weight_bf16, where
// given, is W's bf16 working copy, which bf16 compute reads instead of converting W.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int rows, int c,
                    int oc, const bf16* weight_bf16 = nullptr);

// dinp = dout W (overwritten; skipped when null); dweight += dout^T inp; dbias += column sums of
// dout (skipped when null). Under GradWrite::kOverwrite dweight and dbias are written, not added to.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int rows, int c, int oc, const bf16* weight_bf16 = nullptr,
                     GradWrite write = GradWrite::kAccumulate);

}  // namespace strata::cpu
