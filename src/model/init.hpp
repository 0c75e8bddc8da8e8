// GPT-2 weight initialisation (as nanoGPT): N(0, 0.02) matrices and embeddings, residual
// projections scaled by 1/sqrt(2L), zero biases, unit norms, zero padded vocabulary rows.
#pragma once

#include <cstdint>

#include "model/parameter_layout.hpp"

namespace strata {

// Fills one unit deterministically from (seed, unit index): any process can rebuild any unit
// bit for bit without the others.
void init_unit(const ModelLayout& layout, std::size_t unit_index, std::uint64_t seed, float* data);

}  // namespace strata
