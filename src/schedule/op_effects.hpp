// What each kind of op means, written once: how it relates to its collective (local work, the
// start or the wait of a non-blocking one, or a blocking one), what it reads and writes and in
// what state it leaves each, and which buffer kinds it may allocate and free. The validator (every
// rule), the counting executor (it refuses an effect the kind may not have), the simulator (its
// dispatch on the sync) and the engine (its dispatch, and each access checked against the unit's
// residency) all read this table, so a change to an op's meaning is one change.
#pragma once

#include <array>
#include <iterator>
#include <vector>

#include "schedule/step_schedule.hpp"

namespace strata {

// How an op uses the communication stream.
enum class OpSync {
  kLocal,     // compute-stream work only (or nothing); no collective
  kStart,     // posts its collective to the communication stream and returns at once
  kWait,      // waits for the collective its start posted (same unit, micro-batch and step)
  kBlocking,  // posts its collective behind the earlier ones and waits for it
};

struct OpKindInfo {
  const char* name;
  OpSync sync = OpSync::kLocal;
  OpKind pair = OpKind::kForward;  // a start's wait, a wait's start (meaningful for those two)
  // Buffer kinds (BufferKind order) the op may allocate from its start and free after it.
  std::array<bool, static_cast<std::size_t>(BufferKind::kCount)> allocates{}, frees{};
};

const OpKindInfo& op_kind_info(OpKind kind);
inline constexpr OpKind kAllOpKinds[] = {
    OpKind::kGatherStart,       OpKind::kGatherWait,         OpKind::kKeepSecondary, OpKind::kRelease,
    OpKind::kForward,           OpKind::kBackward,           OpKind::kRecompute,     OpKind::kLossReduce,
    OpKind::kReduceScatterStart,
    OpKind::kReduceScatterWait, OpKind::kReplicaReduceScatterStart, OpKind::kReplicaReduceScatterWait,
    OpKind::kReplicaAllReduceStart, OpKind::kReplicaAllReduceWait, OpKind::kGradNorm, OpKind::kOptimizerStep,
    OpKind::kGatherUpdatedStart, OpKind::kGatherUpdatedWait, OpKind::kInvalidateSecondaries, OpKind::kAgreeStop,
};
inline constexpr std::size_t kOpKindCount = std::size(kAllOpKinds);
static_assert(static_cast<std::size_t>(OpKind::kAgreeStop) + 1 == kOpKindCount, "kAllOpKinds lists every op kind");

// The data an op can touch. Transient ones (a gathered copy, a secondary copy, a unit gradient,
// a block's activations, the loss, the norm, the stop flag) must be produced inside the list before
// they are read; the rest is state that lives across steps. kActivations is the residual stream
// every compute op reads and writes; kBlockActivations is what one block's backward reads, which
// its forward leaves released when the block is recomputed, and its recompute makes valid.
enum class Resource {
  kPrimary, kSecondary, kGathered, kUnitGrad, kGradShard, kOptimizer, kActivations, kBlockActivations, kLoss, kNorm,
  kStopFlag
};
bool is_transient(Resource r);
std::string resource_name(const StepSchedule& s, Resource r, int unit);

// What a write leaves behind: valid data, or a buffer that must not be read.
enum class After { kValid, kInFlight, kReleased, kFreed };

struct Access {
  Resource resource;
  int unit;  // -1 for resources of no unit
  bool read;
  bool write;
  After after = After::kValid;
};

// Where a backward op accumulates unit u's gradient: its unit-gradient buffer when the schedule
// reduce-scatters gradients per micro-batch, else the gradient shard in place.
Resource gradient_resource(const StepSchedule& s);

// Whether a backward op writes unit u's gradient whole instead of adding to it, so no one zeroes
// the buffer first: the op that opens the unit-gradient buffer, or, for a gradient shard written
// in place, every writer in a step's first micro-batch. The tied token table is written first by
// the head, so the embedding's own backward only adds to it (unless it opened the buffer itself).
bool writes_gradient_whole(const StepSchedule& s, const ScheduleOp& op, int unit);

// Every access of one op, in order (reads are checked before writes take effect).
std::vector<Access> op_accesses(const StepSchedule& s, const ScheduleOp& op);

}  // namespace strata
