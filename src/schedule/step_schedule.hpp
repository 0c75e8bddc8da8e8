// A training step as an explicit list of operations with dependencies: gather a unit's weights
// at some levels, compute a unit's forward or backward, reduce-scatter its gradients, update an
// optimizer slice... The runtime executes the list on real backends (zero/sharded_engine); a
// simulator can replay the same list against a cost model. The list is in a valid execution
// order; `deps` name the ops each one needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/traffic_meter.hpp"
#include "core/dtype.hpp"
#include "model/parameter_layout.hpp"
#include "topo/topology.hpp"
#include "zero/shard_plan.hpp"

namespace strata {

enum class OpKind {
  kGatherStart,        // begin gathering a unit's working weights (prefetch point)
  kGatherWait,         // the gathered unit is needed now
  kKeepSecondary,      // keep this rank's secondary (hpZ) shard of the gathered unit
  kRelease,            // drop the gathered copy
  kForward,            // compute
  kBackward,           // compute
  kReduceScatterGrads, // the unit's gradient over the gradient levels, accumulated into the fp32 shard
  kReduceReplicas,     // boundary: finish the reduction at the optimizer's granularity
  kGradNorm,           // boundary: global gradient norm (a control all-reduce)
  kOptimizerStep,      // boundary: AdamW on this rank's slice of the unit
  kGatherUpdated,      // boundary: all-gather the updated weights back to the primary shard
  kBumpEpoch,          // boundary: weights changed; every secondary copy is now stale
};

enum class ComputeStage { kNone, kEmbedding, kBlock, kHead };
enum class WeightSource { kPrimary, kSecondary };
enum class CollectiveKind { kNone, kAllGather, kReduceScatter, kAllReduce };

// A collective of `elements` elements of `dtype` over the levels [first_level, last_level]
// (empty when last < first). An all-reduce is a reduce-scatter then an all-gather.
struct CollectiveSpec {
  CollectiveKind kind = CollectiveKind::kNone;
  int first_level = 0;
  int last_level = -1;
  std::size_t elements = 0;
  DType dtype = DType::kF32;
  bool empty() const { return kind == CollectiveKind::kNone || last_level < first_level; }
};

struct ScheduleOp {
  OpKind kind = OpKind::kForward;
  int micro = -1;  // micro-batch index; -1 at the step boundary
  int unit = -1;   // parameter unit (kForward/kBackward: see `stage`)
  ComputeStage stage = ComputeStage::kNone;
  int layer = -1;
  WeightSource source = WeightSource::kPrimary;
  CollectiveSpec comm;  // the collective this op issues, if any (kGatherStart, kReduceScatterGrads,
                        // kGatherUpdated; kReduceReplicas issues `comm` then `comm2`)
  CollectiveSpec comm2;
  double flops = 0.0;  // compute ops
  TrafficPhase phase = TrafficPhase::kMicroBatch;
  std::vector<int> deps;
};

struct ScheduleInputs {
  const ModelLayout* layout = nullptr;
  std::vector<std::size_t> padded_numel;  // per unit, padded to the plan's largest span
  ShardPlan plan;
  const Topology* topology = nullptr;
  int grad_accum = 1;
  std::size_t tokens_per_micro = 0;  // tokens of this rank's micro-batch (for FLOPs)
  int seq_len = 1;
  DType weight_dtype = DType::kF32;
  DType grad_dtype = DType::kF32;
  bool prefetch = true;
  bool forward_only = false;  // evaluation: gathers and forward compute only
};

struct StepSchedule {
  std::vector<ScheduleOp> ops;
  // Per level, bytes each rank sends in the collectives of the listed ops, by phase.
  std::vector<std::uint64_t> bytes_by_level(const Topology& topology, TrafficPhase phase) const;
};

StepSchedule build_step_schedule(const ScheduleInputs& in);

// Per level, the bytes one rank sends (= receives) in a collective: at level l in [first, last]
// the piece that crosses is the block still being reduced or gathered there divided by fanout.
std::vector<std::uint64_t> collective_bytes_by_level(const Topology& topology, const CollectiveSpec& c);

std::string op_kind_name(OpKind kind);

}  // namespace strata
