// The collectives of one unit, each issued exactly as its CollectiveSpec says: the weight gather
// (local shard placed, then gathered), the gradient reduce-scatter (narrowed to the wire dtype,
// reduced, widened and accumulated in fp32), the boundary replica reductions, and the gather of
// updated weights. A spec with quantization on takes the quantized path (comm/quantized.hpp)
// behind the same calls: qgZ for the reductions, qwZ for the gathers (decoded straight into the
// compute copy).
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

// A bucket of a unit's collective (CollectiveSpec::bucket_*): the span parts of `len` elements at
// i * piece + offset of the buffer the whole collective works on (i in shard-index order), which
// the bucket's call moves packed, one after the other. Unbucketed: one part, the whole buffer.
struct BucketLayout {
  std::size_t span = 1, piece = 0, offset = 0, len = 0;
};
BucketLayout bucket_layout(const Communicator& comm, const CollectiveSpec& spec);
// Copies the parts into `packed` (span x len elements), or back.
void pack_bucket(const void* full, void* packed, const BucketLayout& b, DType type);
void unpack_bucket(const void* packed, void* full, const BucketLayout& b, DType type);

// One bucket of a unit's weight gather, run to completion: this rank's part of its shard
// (`shard`, the whole primary or secondary shard, of spec.dtype) gathered with every rank's
// through scratch (quantized when the spec says), decoded or widened into its parts of `compute`
// (the unit in fp32); bf16 working weights round the decoded values to bf16, as unbucketed ones.
void gather_bucket(Communicator& comm, const CollectiveSpec& spec, const void* shard, DType weight_dtype,
                   float* compute, ScratchPool& scratch);

// One whole (unbucketed) weight gather of a unit, run to completion: this rank's shard (`shard`,
// shard_elements of the working dtype) gathered into `compute` (the padded unit in fp32). Under
// qwZ the blobs land in `staging` and are decoded into compute (bf16 working weights then round
// to bf16, as unquantized ones compute, so a secondary copy taken from them is exact); a bf16
// gather lands in `staging` and is widened; an fp32 one lands in compute (staging == compute).
void gather_unit(Communicator& comm, const CollectiveSpec& spec, const void* shard, std::size_t shard_elements,
                 DType weight_dtype, void* staging, float* compute, std::size_t padded);

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
// A bucket reduces its parts of the whole unit gradient; accumulate() then takes its piece's part
// (into + bucket_offset, len elements).
std::unique_ptr<PendingReduction> start_unit_reduce_scatter(Communicator& comm, const CollectiveSpec& spec,
                                                            float* gradient, ScratchPool& scratch);

// Boundary: reduce-scatters the fp32 gradient shard (spec.elements) over the spec's levels; this
// rank's piece lands, in fp32, at `slice`. A bucket: its parts of the shard, into its part of the
// slice.
void reduce_scatter_replicas(Communicator& comm, const CollectiveSpec& spec, const float* shard, float* slice,
                             ScratchPool& scratch);

// Boundary: sums the fp32 slice (spec.elements) over the spec's levels in place; a bucket, its
// part (slice + bucket_offset).
void all_reduce_replicas(Communicator& comm, const CollectiveSpec& spec, float* slice, ScratchPool& scratch);

// Boundary: the updated fp32 master slice (at master_offset, in unit coordinates) into the primary
// shard of spec.elements working-dtype elements (at primary_offset): gathered over the spec's
// levels when the slice is smaller than the shard, else the shard's part of the slice, narrowed.
// A bucket: its part of the slice, into its parts of the shard.
void gather_updated(Communicator& comm, const CollectiveSpec& spec, const float* master, std::size_t master_elements,
                    std::size_t master_offset, void* primary, std::size_t primary_offset);

}  // namespace strata
