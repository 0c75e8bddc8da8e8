// The one element-wise sum every reduction uses (the ring's rounds, the flat reduce-scatter's local
// sum), so summing the same values in the same order gives the same bits whatever moved them.
#pragma once

#include <cstddef>

#include "core/dtype.hpp"

namespace strata {

// dst[i] = a[i] + b[i] for the summable types; bf16 rounds once per add.
void add_elements(const void* a, const void* b, void* dst, std::size_t count, DType type);

}  // namespace strata
