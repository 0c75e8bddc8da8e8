// The flat forms of the multi-level collectives: one call over every rank of the levels, the MPI
// library's own algorithm (as DeepSpeed and FSDP run NCCL/RCCL), on the same buffers and with
// the same results as comm/hierarchical's level-by-level forms. The reduce-scatter is a flat
// all-to-all followed by a local sum in exactly the order the level-by-level ring sums, so the two
// give the same bits (fp32 and bf16 alike) and a plan may switch between them freely.
#pragma once

#include <cstddef>
#include <memory>

#include "comm/communicator.hpp"

namespace strata {

// As start_hierarchical_all_gather: data holds n elements, this rank's shard in its place.
std::unique_ptr<CommRequest> start_flat_all_gather(Communicator& comm, void* data, std::size_t n, DType type, int first,
                                                   int last);

// As start_hierarchical_reduce_scatter: `data` (n elements) is this rank's contribution; on wait
// `shard` (n / span elements) holds the sum. Needs n / span x span elements of scratch.
std::unique_ptr<CommRequest> start_flat_reduce_scatter(Communicator& comm, void* data, std::size_t n, DType type,
                                                       int first, int last, void* shard);

// Reduce-scatter then all-gather, flat.
void flat_all_reduce(Communicator& comm, void* data, std::size_t n, DType type, int first, int last);

}  // namespace strata
