// Dispatch between the level-by-level and the flat collectives.
#include "comm/multilevel.hpp"

#include "comm/flat.hpp"
#include "comm/hierarchical.hpp"

namespace strata {

std::unique_ptr<CommRequest> start_all_gather_over(Communicator& comm, bool flat, void* data, std::size_t n, DType type,
                                                   int first, int last) {
  return flat ? start_flat_all_gather(comm, data, n, type, first, last)
              : start_hierarchical_all_gather(comm, data, n, type, first, last);
}

std::unique_ptr<CommRequest> start_reduce_scatter_over(Communicator& comm, bool flat, void* data, std::size_t n,
                                                       DType type, int first, int last, void* shard) {
  return flat ? start_flat_reduce_scatter(comm, data, n, type, first, last, shard)
              : start_hierarchical_reduce_scatter(comm, data, n, type, first, last, shard);
}

void all_reduce_over(Communicator& comm, bool flat, void* data, std::size_t n, DType type, int first, int last) {
  if (flat) {
    flat_all_reduce(comm, data, n, type, first, last);
  } else {
    hierarchical_all_reduce(comm, data, n, type, first, last);
  }
}

}  // namespace strata
