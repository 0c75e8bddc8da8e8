// Collectives over a group spanning several levels, decomposed into single-level steps:
// reduce-scatter innermost level first and all-gather outermost first, so the slowest link moves
// the smallest pieces. The shard layout (Topology::shard_index) makes every step's pieces
// contiguous, so no step needs a full-size permutation.
#pragma once

#include <cstddef>
#include <memory>

#include "comm/communicator.hpp"

namespace strata {

// data: n elements, n divisible by span(first, last); used as scratch. On return `shard`
// (n / span elements) holds this rank's piece, summed over the group.
void hierarchical_reduce_scatter(Communicator& comm, void* data, std::size_t n, DType type, int first, int last,
                                 void* shard);

// As hierarchical_reduce_scatter, but the innermost step is started non-blocking; wait() finishes
// it and runs the remaining (outer) steps. `data` and `shard` must live until then.
std::unique_ptr<CommRequest> start_hierarchical_reduce_scatter(Communicator& comm, void* data, std::size_t n,
                                                               DType type, int first, int last, void* shard);

// data: n elements with this rank's shard at shard_index * n / span; on return, all of them.
void hierarchical_all_gather(Communicator& comm, void* data, std::size_t n, DType type, int first, int last);

// As hierarchical_all_gather, but the outermost step is started non-blocking; wait() finishes it
// and runs the remaining (inner, faster) steps. Used to prefetch the next unit's weights.
std::unique_ptr<CommRequest> start_hierarchical_all_gather(Communicator& comm, void* data, std::size_t n, DType type,
                                                           int first, int last);

// Reduce-scatter then all-gather over the same levels: every rank ends with the sum.
void hierarchical_all_reduce(Communicator& comm, void* data, std::size_t n, DType type, int first, int last);


}  // namespace strata
