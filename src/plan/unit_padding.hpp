// How long each unit's flat buffer is once padded: a multiple of the world size, so every shard of
// every state and every step of every level-decomposed collective is a whole number of elements.
#pragma once

#include <cstddef>
#include <vector>

#include "model/parameter_layout.hpp"
#include "topo/topology.hpp"

namespace strata {

// The world size, not just the largest state span: replicated gradients are still reduced across
// all ranks (an all-reduce is a reduce-scatter then an all-gather), which needs it.
std::vector<std::size_t> padded_unit_sizes(const ModelLayout& layout, const Topology& t);

}  // namespace strata
