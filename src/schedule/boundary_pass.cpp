// The builder's step boundary: the replica reductions (started in the last micro-batch where the
// boundary overlaps), the gradient norm, the stop agreement, AdamW per unit, and the updated-weights
// gathers whose waits, overlapped, are the next step's first gathers'.
#include "schedule/schedule_builder.hpp"

#include <fmt/format.h>

namespace strata {

CollectiveSpec ScheduleBuilder::replica_reduce_scatter_spec(int u) const {
  if (plan_.optimizer <= plan_.grads) return {};
  return with_quant({CollectiveKind::kReduceScatter, plan_.grads + 1, plan_.optimizer, shards_.unit(u).grads.len,
                     in_.grad_dtype},
                    plan_.grad_quant());
}
CollectiveSpec ScheduleBuilder::replica_all_reduce_spec(int u) const {
  if (plan_.optimizer >= top_) return {};
  return with_quant({CollectiveKind::kAllReduce, plan_.optimizer + 1, top_, shards_.unit(u).optimizer.len,
                     in_.grad_dtype},
                    plan_.grad_quant());
}

CollectiveSpec ScheduleBuilder::updated_spec(int u) const {
  // Empty (no levels) when the optimizer slice already covers the primary shard; the spec still
  // says what lands there. Never quantized: it writes the primary shard itself, and quantizing it
  // would make the rounding permanent.
  return flat_if_planned({CollectiveKind::kAllGather, plan_.weights + 1, plan_.optimizer, shards_.unit(u).weights.len,
                          in_.weight_dtype});
}

// A replica reduction's starts (every bucket), boundary traffic wherever they are issued.
std::vector<int> ScheduleBuilder::replica_starts(OpKind kind, int micro, int u, const CollectiveSpec& spec) {
  UnitTimeline& t = unit(u);
  ScheduleOp op = make(kind, micro, u);
  op.phase = TrafficPhase::kStepBoundary;
  op.deps = {t.grad_written};
  const std::vector<int> ids = add_bucket_starts(std::move(op), spec);
  t.grad_written = ids.back();
  return ids;
}
void ScheduleBuilder::replica_waits(OpKind kind, int u, const std::vector<int>& starts) {
  UnitTimeline& t = unit(u);
  ScheduleOp last = make(kind, -1, u);
  t.grad_written = add_bucket_waits(kind, -1, u, starts, {t.grad_written}, std::move(last));
}

// With the boundary overlap, in the step's last micro-batch: the unit's replica reduction starts as
// soon as its gradient shard is final (its wait is at the boundary, before the norm). When the plan
// needs both a reduce-scatter and an all-reduce, the second waits for the boundary.
void ScheduleBuilder::replica_start(int micro, int u) {
  if (!overlap_ || micro != in_.grad_accum - 1) return;
  const CollectiveSpec rs = replica_reduce_scatter_spec(u), ar = replica_all_reduce_spec(u);
  if (rs.kind != CollectiveKind::kNone) {
    unit(u).pending(OpKind::kReplicaReduceScatterStart) = replica_starts(OpKind::kReplicaReduceScatterStart, micro, u, rs);
  } else if (ar.kind != CollectiveKind::kNone) {
    unit(u).pending(OpKind::kReplicaAllReduceStart) = replica_starts(OpKind::kReplicaAllReduceStart, micro, u, ar);
  }
}

// The updated-weights gather of the step before (each of its buckets), waited for just before the
// unit's first gather of this step reads the primary shard it writes. In the list's first step the
// starts are the previous run's: the waits are carried.
void ScheduleBuilder::await_update(int micro, int u) {
  UnitTimeline& t = unit(u);
  if (t.update_carried_in) {
    const std::vector<CollectiveSpec> specs = buckets_of(updated_spec(u));
    int prev = -1;
    for (std::size_t b = 0; b < specs.size(); ++b) {
      ScheduleOp op = make(OpKind::kGatherUpdatedWait, micro, u);
      op.carried = true;
      op.comm = no_bytes(specs[b]);
      op.bucket = static_cast<int>(b);
      op.buckets = static_cast<int>(specs.size());
      op.deps = {prev};
      prev = add(op);
    }
    t.updated = prev;
    t.update_carried_in = false;
    return;
  }
  const std::vector<int> starts = t.take_pending(OpKind::kGatherUpdatedStart);
  if (starts.empty()) return;
  t.updated = add_bucket_waits(OpKind::kGatherUpdatedWait, micro, u, starts, {}, make(OpKind::kGatherUpdatedWait, micro, u));
}

void ScheduleBuilder::boundary() {
  begin_segment(SegmentKind::kBoundaryReduce, -1, fmt::format("step {} boundary reduction", step_));
  for (int u = 0; u < s_.unit_count; ++u) {
    // Starts posted in the last micro-batch are waited for here; the rest start and wait here.
    const CollectiveSpec rs = replica_reduce_scatter_spec(u), ar = replica_all_reduce_spec(u);
    if (rs.kind != CollectiveKind::kNone) {
      std::vector<int> starts = unit(u).take_pending(OpKind::kReplicaReduceScatterStart);
      if (starts.empty()) starts = replica_starts(OpKind::kReplicaReduceScatterStart, -1, u, rs);
      replica_waits(OpKind::kReplicaReduceScatterWait, u, starts);
    }
    if (ar.kind != CollectiveKind::kNone) {
      std::vector<int> starts = unit(u).take_pending(OpKind::kReplicaAllReduceStart);
      if (starts.empty()) starts = replica_starts(OpKind::kReplicaAllReduceStart, -1, u, ar);
      replica_waits(OpKind::kReplicaAllReduceWait, u, starts);
    }
  }
  ScheduleOp norm = make(OpKind::kGradNorm, -1, -1);
  norm.comm = {CollectiveKind::kControlSum, 0, plan_.optimizer, 1, DType::kF64};
  for (const UnitTimeline& t : units_) norm.deps.push_back(t.grad_written);
  const int norm_id = add(norm);

  begin_segment(SegmentKind::kBoundaryUpdate, -1, fmt::format("step {} update", step_));
  // The ranks agree whether any was asked to stop after this step: one scalar over the world, a
  // scheduled control op like the loss, so the meter counts it and the simulator prices it. First
  // in the update, so that no updated-weights gather in flight has to finish before it.
  ScheduleOp agree = make(OpKind::kAgreeStop, -1, -1);
  agree.comm = {CollectiveKind::kControlMax, 0, top_, 1, DType::kF64};
  agree.deps = {norm_id, last_agree_};  // the flag of the step before
  last_agree_ = add(agree);
  std::vector<int> updating;
  for (int u = 0; u < s_.unit_count; ++u) {
    UnitTimeline& t = unit(u);
    ScheduleOp step = make(OpKind::kOptimizerStep, -1, u);
    step.deps = {norm_id};
    const int step_id = add(step);
    ScheduleOp ag = make(OpKind::kGatherUpdatedStart, -1, u);
    // Overwrites the primary shard: every gather that reads it must have finished.
    ag.deps = {step_id, last_compute_};
    ag.carried = overlap_ && step_ + 1 == in_.steps;
    const std::vector<int> starts = add_bucket_starts(std::move(ag), updated_spec(u));
    if (overlap_) {
      t.pending(OpKind::kGatherUpdatedStart) = starts;  // waited for by the next step's first gather of the unit
      updating.insert(updating.end(), starts.begin(), starts.end());
    } else {
      t.updated = add_bucket_waits(OpKind::kGatherUpdatedWait, -1, u, starts, {}, make(OpKind::kGatherUpdatedWait, -1, u));
      updating.push_back(t.updated);
    }
    t.grad_written = step_id;  // the next step starts from zeroed gradients after the update
  }
  ScheduleOp invalidate = make(OpKind::kInvalidateSecondaries, -1, -1);
  invalidate.deps = updating;
  add(invalidate);
}

}  // namespace strata
