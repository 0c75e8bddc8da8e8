// Scratch of each unit collective, following the paths comm/ and engine/unit_collectives take.
#include "comm/collective_staging.hpp"

#include <algorithm>

#include "comm/quantized.hpp"

namespace strata {

namespace {

std::uint64_t span_of(const Topology& t, const CollectiveSpec& s) {
  return static_cast<std::uint64_t>(t.span(s.first_level, s.last_level));
}

// The first level of the range with more than one rank (its fan-out; 1 when there is none).
std::uint64_t first_fanout(const Topology& t, const CollectiveSpec& s) {
  for (int l = s.first_level; l <= s.last_level; ++l) {
    if (t.level(l).fanout > 1) return static_cast<std::uint64_t>(t.level(l).fanout);
  }
  return 1;
}

// Inside a plain reduce-scatter of n elements of `size` bytes: a flat one receives every peer's
// piece and sums them in order (one more piece); a chained one keeps the first level's piece,
// and a ring longer than two keeps two pieces in flight at that level (the largest step).
std::uint64_t reduce_scatter_internal(const Topology& t, const CollectiveSpec& s, std::uint64_t n, std::uint64_t size) {
  const std::uint64_t span = span_of(t, s);
  if (span == 1) return 0;
  if (s.flat) return n * size + n / span * size;
  const std::uint64_t f = first_fanout(t, s);
  return n / f * size + (f > 2 ? 2 * (n / f) * size : 0);
}

// Inside a quantized reduce-scatter: the first hop's send and receive blobs (later hops reuse them).
std::uint64_t quantized_reduce_scatter_internal(const Topology& t, const CollectiveSpec& s, std::uint64_t n) {
  const std::uint64_t f = first_fanout(t, s);
  if (f == 1) return 0;
  return 2 * f * quantized_bytes(s.quant, n / f);
}

}  // namespace

ReductionBuffers reduction_buffers(const Topology& t, const CollectiveSpec& s) {
  ReductionBuffers b;
  const std::uint64_t n = s.elements, piece = n / span_of(t, s);
  if (s.bucketed()) b.packed = n * sizeof(float);
  if (s.quant.enabled()) {
    b.out = piece * sizeof(float);
    return b;
  }
  const std::uint64_t size = dtype_size(s.dtype);
  if (s.dtype != DType::kF32) {
    b.wire = n * size;
    b.wide = piece * sizeof(float);
  }
  b.out = piece * size;
  return b;
}

StagingBytes collective_staging_bytes(const Topology& t, const CollectiveSpec& s, StagingUse use) {
  if (s.empty() || s.is_control()) return {};
  const std::uint64_t n = s.elements, span = span_of(t, s), piece = n / span;
  const std::uint64_t size = dtype_size(s.dtype);
  const std::uint64_t reduce_internal =
      s.quant.enabled() ? quantized_reduce_scatter_internal(t, s, n) : reduce_scatter_internal(t, s, n, size);
  switch (use) {
    case StagingUse::kGradientReduction: return {reduction_buffers(t, s).total(), reduce_internal};
    // An unbucketed replica reduction copies the shard first, so its rest survives the collective.
    case StagingUse::kReplicaReduction:
      return {(s.bucketed() ? 0 : n * sizeof(float)) + reduction_buffers(t, s).total(), reduce_internal};
    case StagingUse::kReplicaAllReduce:
      if (s.quant.enabled()) {
        return {0, piece * sizeof(float) + reduce_internal + quantized_gather_bytes(s.quant, piece, span)};
      }
      // The narrowed copy (pooled); the reduced piece and the reduce-scatter inside the all-reduce.
      return {n * size, span > 1 ? piece * size + reduce_internal : 0};
    case StagingUse::kWeightGather: {
      if (!s.bucketed()) return {};
      const std::uint64_t received = s.quant.enabled() ? quantized_gather_bytes(s.quant, piece, span) : n * size;
      return {n * sizeof(float) + received, 0};
    }
    case StagingUse::kUpdatedGather: return {0, s.bucketed() ? n * size : 0};
  }
  return {};
}

}  // namespace strata
