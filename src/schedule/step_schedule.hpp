// A training step as the program the engine runs: an explicit list of operations (gather a unit,
// compute its forward or backward, reduce-scatter its gradient, update an optimizer slice, ...),
// each carrying the full collective it issues, the memory it allocates and frees, and the ops it
// depends on. The MPI engine executes it; the counting executor (and later the simulator) replays
// the same list. The list order is one valid execution order; `deps` say which others are valid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/collective_spec.hpp"
#include "comm/traffic_meter.hpp"
#include "core/dtype.hpp"
#include "model/activation_checkpointing.hpp"
#include "model/parameter_layout.hpp"
#include "plan/shard_plan.hpp"
#include "topo/topology.hpp"

namespace strata {

enum class OpKind {
  kGatherStart,          // begin gathering a unit's working weights (from the primary or secondary shard)
  kGatherWait,           // the gathered unit is complete
  kKeepSecondary,        // keep this rank's secondary (hpZ) shard of the gathered unit for backward
  kRelease,              // drop the gathered copy
  kForward,              // compute
  kBackward,             // compute
  kRecompute,            // a recomputed block's forward again, just before its backward (same gathered weights)
  kLossReduce,           // control sum of the micro-batch's loss over every rank
  kReduceScatterStart,   // begin reducing a unit's gradient over the gradient levels
  kReduceScatterWait,    // the reduced piece is in; accumulate it into the fp32 gradient shard
  // Boundary: reduce the gradient shard over the levels between gradients and optimizer. With the
  // boundary overlap the start is posted as soon as the unit's last micro-batch gradient is in.
  kReplicaReduceScatterStart,
  kReplicaReduceScatterWait,
  kReplicaAllReduceStart,  // boundary: sum the optimizer slice over the levels above the optimizer
  kReplicaAllReduceWait,
  kGradNorm,             // boundary: global gradient norm (a control sum over the optimizer levels)
  kOptimizerStep,        // boundary: AdamW on this rank's slice of the unit
  // Boundary: updated weights back to the primary shard (a gather when needed). With the boundary
  // overlap the wait is the next step's, just before that unit's first gather.
  kGatherUpdatedStart,
  kGatherUpdatedWait,
  kInvalidateSecondaries,  // boundary: weights changed; every secondary copy made before is stale
  kAgreeStop,            // boundary: every rank learns whether any was asked to stop after this step
};

enum class ComputeStage { kNone, kEmbedding, kBlock, kHead };
enum class WeightSource { kPrimary, kSecondary };

// Memory the schedule accounts for: gathered units (fp32 compute copy, plus the bf16 staging copy
// when the working weights are bf16), secondary copies, and full-unit gradient buffers awaiting
// their reduce-scatter. Resident state (shards of weights, gradients, optimizer) is apart.
enum class BufferKind { kGathered = 0, kSecondary = 1, kUnitGrad = 2, kCount = 3 };

struct BufferEffect {
  BufferKind kind = BufferKind::kGathered;
  int unit = -1;
  std::uint64_t bytes = 0;
  bool operator==(const BufferEffect&) const = default;
};

struct ScheduleOp {
  OpKind kind = OpKind::kForward;
  int step = 0;    // which step of the list (lists of several steps exist for validation)
  int micro = -1;  // micro-batch index; -1 at the step boundary
  int unit = -1;   // the unit the op is about; compute ops: the stage's first unit
  int segment = 0; // index into StepSchedule::segments
  ComputeStage stage = ComputeStage::kNone;
  int layer = -1;
  WeightSource source = WeightSource::kPrimary;  // gathers
  std::vector<int> weight_units;  // compute: the units whose gathered weights it reads
  std::vector<int> grad_units;    // backward: the units whose gradient it writes
  CollectiveSpec comm;            // the collective this op issues (empty: none)
  double flops = 0.0;             // compute ops: model FLOPs on this rank's micro-batch
  TrafficPhase phase = TrafficPhase::kMicroBatch;
  std::vector<BufferEffect> alloc;  // buffers live from the start of this op
  std::vector<BufferEffect> free;   // buffers dead after this op
  std::vector<int> deps;            // ops (indices into the list) that must finish first
  // A start whose wait is in the next execution of the list (the next step), or a wait whose
  // start was in the previous one: the step boundary overlapped into the next step's forward.
  bool carried = false;
  // A collective split into buckets (plan bucket_bytes): this op's bucket of `buckets`.
  int bucket = 0;
  int buckets = 1;
};

// A run of consecutive ops the engine executes in one call of its interface: one micro-batch's
// forward and backward, the boundary reduction (up to the gradient norm), or the update.
enum class SegmentKind { kMicroBatch, kBoundaryReduce, kBoundaryUpdate, kEvaluate };
struct ScheduleSegment {
  SegmentKind kind = SegmentKind::kMicroBatch;
  int step = 0;
  int micro = -1;
  int begin = 0, end = 0;  // op indices [begin, end)
  std::string name;        // "step 0 micro 1", "step 0 boundary reduction", ...
};

// A state each rank holds for the whole run: its level, span and bytes per rank, summed over the
// units' actual shard lengths.
struct ResidentState {
  std::string state;  // "weights", "grads", "optimizer"
  int level = kReplicated;
  int span = 1;
  std::uint64_t bytes = 0;
};

enum class ScheduleMode { kTrain, kEvaluate };

// The settings a step's program depends on besides the model, the micro-batch and the machine:
// one struct that the engine's options and the simulator's inputs both are, so every schedule
// (the engine's, the simulator's, calibration's, the set-up's memory check) is built alike.
struct StepOptions {
  ShardPlan plan;
  int grad_accum = 1;                // micro-batches per step: the schedule holds every one
  DType weight_dtype = DType::kF32;  // working weights (and their collectives)
  DType grad_dtype = DType::kF32;    // communicated gradients; accumulation is always fp32
  // Stages whose gathers start before the current stage computes (0: each gather starts when its
  // stage is reached). Bounded by max_live_bytes.
  int prefetch = 1;
  // Gathered-but-not-released bytes (kGathered buffers) never exceed this in any valid order of
  // the list; 0: no bound. Refused when below what the largest stage needs alone.
  std::uint64_t max_live_bytes = 0;
  // Overlap the step boundary: each unit's replica reduction starts when its last micro-batch
  // gradient is in, and its updated-weights gather is waited for by the next step's first gather
  // of it. Off: both run at the boundary, start and wait together.
  bool boundary_overlap = true;
  // The blocks that keep only their input in forward and recompute the rest in backward (a
  // kRecompute op before their backward, on the backward gather's weights).
  ActivationCheckpointing activation_checkpointing;
};

// What the builder needs: the step's settings (one StepOptions, never copied field by field), the
// model and machine, and the micro-batch's shape.
struct ScheduleInputs : StepOptions {
  const ModelLayout* layout = nullptr;
  const Topology* topology = nullptr;
  ScheduleMode mode = ScheduleMode::kTrain;
  int steps = 1;                     // consecutive steps in one list (the engine runs lists of one)
  std::size_t tokens_per_micro = 0;  // tokens of this rank's micro-batch (for FLOPs)
  int seq_len = 1;
};

// The one way from the step's settings to the builder's inputs. micro_batch: this rank's
// sequences per micro-batch.
ScheduleInputs schedule_inputs(const ModelLayout& layout, const Topology& topology, const StepOptions& step,
                               int micro_batch, int seq_len, ScheduleMode mode = ScheduleMode::kTrain);

struct StepSchedule {
  std::vector<ScheduleOp> ops;
  std::vector<ScheduleSegment> segments;
  std::vector<ResidentState> resident;
  std::vector<std::size_t> padded_numel;  // per unit
  std::vector<std::string> unit_names;
  int unit_count = 0;
  bool grads_partitioned = false;  // backward writes unit gradient buffers (else the shard in place)
  ActivationCheckpointing activation_checkpointing;  // which blocks' forward leaves no activations
};

StepSchedule build_step_schedule(const ScheduleInputs& in);

std::string op_kind_name(OpKind kind);  // schedule/op_effects.cpp: from the table
std::string buffer_kind_name(BufferKind kind);
// "op 17 (gather_wait of block.3, step 0 micro 1)"
std::string describe_op(const StepSchedule& schedule, int index);

}  // namespace strata
