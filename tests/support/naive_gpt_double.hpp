// Test support: an independent, deliberately naive GPT-2 forward pass in double precision
// (plain loops, no BLAS, libm's tanh and exp), used as the function for finite differences.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/parameter_layout.hpp"

namespace strata::testing {

// params[u] holds unit u in the layout's flat order, as doubles. Returns the mean cross-entropy.
double naive_gpt_loss(const ModelLayout& layout, const std::vector<std::vector<double>>& params,
                      std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets, int batch,
                      int seq_len);

}  // namespace strata::testing
