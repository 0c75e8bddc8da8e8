// Token + learned position embedding lookup.
#pragma once

#include <cstdint>

namespace strata::cpu {

// out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]
void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, int batch,
                       int seq_len, int channels);

// dwte[tokens[b, t], :] += dout[b, t, :]; dwpe[t, :] += dout[b, t, :]. Does not read the weights,
// so an engine need not gather them for this step.
void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, int batch,
                        int seq_len, int channels);

}  // namespace strata::cpu
