// A collective over several levels in the form its spec asks for: level by level (comm/hierarchical:
// exact per-link bytes, the slow link moving the smallest pieces) or flat (comm/flat: one call,
// the library's algorithm). Both take the same buffers and give the same bits.
#pragma once

#include <cstddef>
#include <memory>

#include "comm/communicator.hpp"

namespace strata {

std::unique_ptr<CommRequest> start_all_gather_over(Communicator& comm, bool flat, void* data, std::size_t n, DType type,
                                                   int first, int last);
std::unique_ptr<CommRequest> start_reduce_scatter_over(Communicator& comm, bool flat, void* data, std::size_t n,
                                                       DType type, int first, int last, void* shard);
void all_reduce_over(Communicator& comm, bool flat, void* data, std::size_t n, DType type, int first, int last);

}  // namespace strata
