// The scratch memory a unit collective needs beyond its input and output: the engine's pooled
// pieces (packed bucket, narrowed wire copy, received piece, widened piece) and what the level
// primitives allocate inside (a flat call's received pieces, a chained step's piece, a ring's
// partials, quantized blobs). One function, read by the engine to size its buffers and by the
// counting executor to predict the peak, so the memory model and the run cannot drift apart.
#pragma once

#include <cstdint>

#include "comm/collective_spec.hpp"

namespace strata {

// A gradient reduction's pooled buffers (UnitReduction), held from its start until it is finished.
struct ReductionBuffers {
  std::uint64_t packed = 0;  // a bucket's parts of the unit gradient, fp32
  std::uint64_t wire = 0;    // the narrowed copy a non-fp32 wire sends
  std::uint64_t out = 0;     // the received piece (fp32 when quantized)
  std::uint64_t wide = 0;    // the received piece widened to fp32 (non-fp32 wires)
  std::uint64_t total() const { return packed + wire + out + wide; }
};
ReductionBuffers reduction_buffers(const Topology& topology, const CollectiveSpec& spec);

// What a collective is used for decides which buffers it takes and how long it holds them.
enum class StagingUse {
  kGradientReduction,  // a micro-batch reduce-scatter: held from its start until its wait
  kReplicaReduction,   // the boundary's reduce-scatter over replicas of a gradient shard
  kReplicaAllReduce,   // the boundary's all-reduce over replicas
  kWeightGather,       // a weight gather (a bucket's; an unbucketed one lands in the schedule's buffer)
  kUpdatedGather,      // the updated weights' gather after the optimizer
};

// Bytes the collective holds at its peak: the engine's pooled buffers (what its scratch pool's
// high-water mark counts) and the level primitives' own (a gather's spec.dtype is the working
// weights').
struct StagingBytes {
  std::uint64_t pooled = 0, internal = 0;
  std::uint64_t total() const { return pooled + internal; }
};
StagingBytes collective_staging_bytes(const Topology& topology, const CollectiveSpec& spec, StagingUse use);

}  // namespace strata
