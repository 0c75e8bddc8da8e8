// GELU, tanh approximation (torch.nn.functional.gelu(approximate="tanh")).
#pragma once

#include <cstddef>

namespace strata::cpu {

void gelu_forward(float* out, const float* inp, std::size_t n);
// dinp = gelu'(inp) * dout (overwritten; dinp may alias dout).
void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n);

}  // namespace strata::cpu
