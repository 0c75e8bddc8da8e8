// Element-wise helpers for the residual stream.
#pragma once

#include <cstddef>

namespace strata::cpu {

// out = a + b (out may alias a or b).
void add(float* out, const float* a, const float* b, std::size_t n);
// out = in
void copy(float* out, const float* in, std::size_t n);

}  // namespace strata::cpu
