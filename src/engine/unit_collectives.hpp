// The collectives of one unit, each issued exactly as its CollectiveSpec says: the weight gather
// (local shard placed, then gathered), the gradient reduce-scatter (narrowed to the wire dtype,
// reduced, widened and accumulated in fp32), the boundary replica reductions, and the gather of
// updated weights. A spec with quantization on takes the quantized path (comm/quantized.hpp)
// behind the same calls: qgZ for the reductions; qwZ gathers are started by the engine itself,
// since they decode straight into the compute copy.
#pragma once

#include <cstddef>
#include <memory>

#include "comm/collective_spec.hpp"
#include "comm/communicator.hpp"
#include "engine/scratch_pool.hpp"

namespace strata {

// fp32 to the working dtype and back (a copy for fp32).
void narrow_to(void* out, const float* in, std::size_t n, DType type);
void widen_from(float* out, const void* in, std::size_t n, DType type);

// Starts gathering spec.elements elements of spec.dtype into `gathered`: this rank's shard of
// `shard_elements` (spec.elements / span of the spec's levels) is copied into its place first.
std::unique_ptr<CommRequest> start_unit_gather(Communicator& comm, const CollectiveSpec& spec, const void* shard,
                                               std::size_t shard_elements, void* gathered);

// A gradient reduce-scatter in flight. complete() waits for it (this rank's piece is then in fp32,
// held here); accumulate() adds that piece into `into`. finish() is the two. With overlap the
// communication thread runs complete() and the compute thread accumulate().
class PendingReduction {
 public:
  virtual ~PendingReduction() = default;
  virtual void complete() = 0;
  virtual void accumulate(float* into, std::size_t piece_elements) = 0;
  void finish(float* into, std::size_t piece_elements) {
    complete();
    accumulate(into, piece_elements);
  }
};

// Starts reducing spec.elements fp32 gradient elements over the spec's levels in spec.dtype. The
// gradient buffer is the collective's scratch until finish() (the schedule frees it at the wait).
std::unique_ptr<PendingReduction> start_unit_reduce_scatter(Communicator& comm, const CollectiveSpec& spec,
                                                            float* gradient, ScratchPool& scratch);

// Boundary: reduce-scatters the fp32 gradient shard (spec.elements) over the spec's levels; this
// rank's piece lands, in fp32, at `slice`.
void reduce_scatter_replicas(Communicator& comm, const CollectiveSpec& spec, const float* shard, float* slice,
                             ScratchPool& scratch);

// Boundary: sums the fp32 slice (spec.elements) over the spec's levels in place.
void all_reduce_replicas(Communicator& comm, const CollectiveSpec& spec, float* slice, ScratchPool& scratch);

// Boundary: the updated fp32 master slice (at master_offset, in unit coordinates) into the primary
// shard of spec.elements working-dtype elements (at primary_offset): gathered over the spec's
// levels when the slice is smaller than the shard, else the shard's part of the slice, narrowed.
void gather_updated(Communicator& comm, const CollectiveSpec& spec, const float* master, std::size_t master_elements,
                    std::size_t master_offset, void* primary, std::size_t primary_offset);

}  // namespace strata
