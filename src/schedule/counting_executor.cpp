// The counting executor.
#include "schedule/counting_executor.hpp"

#include <algorithm>
#include <optional>

#include "core/error.hpp"
#include "schedule/op_effects.hpp"

namespace strata {

CountingExecutor::CountingExecutor(const StepSchedule& schedule, const Topology& topology)
    : schedule_(schedule), topology_(topology), units_(unit_lifecycles(schedule)) {
  for (auto& v : counts_.bytes) v.assign(static_cast<std::size_t>(topology.level_count()), 0);
  for (auto& v : counts_.calls) v.assign(static_cast<std::size_t>(topology.level_count()), 0);
}

namespace {

// The staging use of an op's collective (none for ops that start nothing).
std::optional<StagingUse> staging_use(OpKind kind) {
  switch (kind) {
    case OpKind::kGatherStart: return StagingUse::kWeightGather;
    case OpKind::kReduceScatterStart: return StagingUse::kGradientReduction;
    case OpKind::kReplicaReduceScatterStart: return StagingUse::kReplicaReduction;
    case OpKind::kReplicaAllReduceStart: return StagingUse::kReplicaAllReduce;
    case OpKind::kGatherUpdatedStart: return StagingUse::kUpdatedGather;
    default: return std::nullopt;
  }
}

}  // namespace

void CountingExecutor::count_staging(const ScheduleOp& op) {
  const auto key = std::make_pair(op.unit, op.bucket);
  if (op.kind == OpKind::kReduceScatterWait) {
    const auto held = staging_held_.find(key);
    if (held != staging_held_.end()) {
      staging_live_.pooled -= held->second.pooled;
      staging_live_.internal -= held->second.internal;
      staging_held_.erase(held);
    }
    return;
  }
  const auto use = staging_use(op.kind);
  if (!use) return;
  const StagingBytes bytes = collective_staging_bytes(topology_, op.comm, *use);
  counts_.staging_peak_bytes = std::max(counts_.staging_peak_bytes, staging_live_.total() + bytes.total());
  live_with_staging_peak_ =
      std::max(live_with_staging_peak_, ledger_.live_bytes() + staging_live_.total() + bytes.total());
  counts_.staging_pool_peak_bytes = std::max(counts_.staging_pool_peak_bytes, staging_live_.pooled + bytes.pooled);
  if (*use == StagingUse::kGradientReduction && bytes.total() > 0) {
    StagingBytes& held = staging_held_[key];
    held.pooled += bytes.pooled;
    held.internal += bytes.internal;
    staging_live_.pooled += bytes.pooled;
    staging_live_.internal += bytes.internal;
  }
}

void CountingExecutor::execute(const ScheduleOp& op, OpContext& /*context: nothing runs*/) {
  // What it counts must be what the op kind may do (schedule/op_effects).
  const OpKindInfo& info = op_kind_info(op.kind);
  for (const BufferEffect& b : op.alloc) {
    STRATA_CHECK(info.allocates[static_cast<std::size_t>(b.kind)], "{} allocates {} memory, which its kind may not",
                 op_kind_name(op.kind), buffer_kind_name(b.kind));
  }
  for (const BufferEffect& b : op.free) {
    STRATA_CHECK(info.frees[static_cast<std::size_t>(b.kind)], "{} frees {} memory, which its kind may not",
                 op_kind_name(op.kind), buffer_kind_name(b.kind));
  }
  apply_op(schedule_, op, units_);
  for (const BufferEffect& b : op.alloc) ledger_.allocate(b);
  counts_.peak_live_bytes = ledger_.peak_bytes();
  counts_.peak_by_kind = ledger_.peak_by_kind();
  live_with_staging_peak_ = std::max(live_with_staging_peak_, ledger_.live_bytes() + staging_live_.total());
  if (op.comm.is_control()) {
    if (!op.comm.empty()) {
      ++counts_.control_calls;
      counts_.control_bytes += op.comm.elements * dtype_size(op.comm.dtype);
    }
  } else {
    const auto phase = static_cast<std::size_t>(op.phase);
    const auto bytes = collective_bytes_by_level(topology_, op.comm);
    const auto calls = collective_calls_by_level(topology_, op.comm);
    for (std::size_t l = 0; l < bytes.size(); ++l) {
      counts_.bytes[phase][l] += bytes[l];
      counts_.calls[phase][l] += calls[l];
    }
  }
  count_staging(op);
  counts_.peak_with_staging_bytes =
      std::max(live_with_staging_peak_, counts_.peak_live_bytes + counts_.staging_pool_peak_bytes);
  if (op.kind == OpKind::kForward) counts_.forward_flops += op.flops;
  if (op.kind == OpKind::kBackward) counts_.backward_flops += op.flops;
  if (op.kind == OpKind::kRecompute) counts_.recompute_flops += op.flops;
  for (const BufferEffect& b : op.free) ledger_.free(b);
}

ScheduleCounts count_schedule(const StepSchedule& schedule, const Topology& topology) {
  CountingExecutor counter(schedule, topology);
  run_all(schedule, counter);
  return counter.counts();
}

}  // namespace strata
