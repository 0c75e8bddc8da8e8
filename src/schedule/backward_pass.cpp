// The builder's backward pass: blocks in reverse, each gathered (from the hpZ copy where the plan
// keeps one) ahead of its compute, a recomputed block's forward redone between its gather and its
// backward; each unit's gradient reduce-scattered while the next unit's
// backward runs, its wait accumulating into the gradient shard.
#include "schedule/schedule_builder.hpp"

namespace strata {

void ScheduleBuilder::reduce_scatter_start(int micro, int u, int backward) {
  if (!s_.grads_partitioned) return;
  ScheduleOp op = make(OpKind::kReduceScatterStart, micro, u);
  const CollectiveSpec spec =
      with_quant({CollectiveKind::kReduceScatter, 0, plan_.grads, numel(u), in_.grad_dtype}, plan_.grad_quant());
  op.deps = {backward};
  unit(u).pending(OpKind::kReduceScatterStart) = add_bucket_starts(std::move(op), spec);
  reducing_.push_back(u);
}

// Waits for every reduce-scatter in flight: called after the next backward compute, so each unit's
// reduction overlaps the backward of the unit before it.
void ScheduleBuilder::reduce_scatter_waits(int micro) {
  for (const int u : reducing_) {
    UnitTimeline& t = unit(u);
    ScheduleOp last = make(OpKind::kReduceScatterWait, micro, u);
    last.free.push_back({BufferKind::kUnitGrad, u, numel(u) * sizeof(float)});
    // Accumulation into the shard in a fixed order.
    const int id = add_bucket_waits(OpKind::kReduceScatterWait, micro, u, t.take_pending(OpKind::kReduceScatterStart),
                                    {t.grad_written}, std::move(last));
    t.grad_written = id;
    t.grad_freed = id;
    t.grad_open = false;
    replica_start(micro, u);  // the shard holds the step's whole gradient of the unit now
  }
  reducing_.clear();
}

void ScheduleBuilder::head_backward(int micro, const Stage& head) {
  const int bwd = compute(OpKind::kBackward, micro, ComputeStage::kHead, -1, head.units, head.units, {});
  for (int u : head.units) release(micro, u, {bwd});
  // The embedding's gradient is complete only after the lookup's backward, at the very end.
  reduce_scatter_start(micro, head.units.front(), bwd);
  if (!s_.grads_partitioned) replica_start(micro, head.units.front());
}

void ScheduleBuilder::backward_pass(int micro) {
  const ModelLayout& lay = *in_.layout;
  const int layers = lay.config().n_layer;
  Issuer is;
  is.source = secondary_in_use() ? WeightSource::kSecondary : WeightSource::kPrimary;
  is.backward = true;
  for (int l = layers - 1; l >= 0; --l) is.units.push_back({static_cast<int>(lay.block_unit(l))});
  is.starts.resize(is.units.size());
  for (std::size_t i = 0; i < is.units.size(); ++i) {
    const int l = layers - 1 - static_cast<int>(i);
    const int u = static_cast<int>(lay.block_unit(l));
    issue_through(micro, is, i, false);
    const int wait = gather_wait(micro, u, is.starts[i][0]);
    if (in_.prefetch > 0) issue_through(micro, is, i, true);
    // A recomputed block redoes its forward on the weights its backward gathered: one gather for both.
    const int ready = in_.activation_checkpointing.recomputes(l)
                          ? compute(OpKind::kRecompute, micro, ComputeStage::kBlock, l, {u}, {}, {wait})
                          : wait;
    const int bwd = compute(OpKind::kBackward, micro, ComputeStage::kBlock, l, {u}, {u}, {ready});
    reduce_scatter_waits(micro);  // those started before this compute
    release(micro, u, {bwd});
    reduce_scatter_start(micro, u, bwd);
    if (!s_.grads_partitioned) replica_start(micro, u);  // accumulated in place: final now
  }
  const auto emb = static_cast<int>(ModelLayout::kEmbeddingUnit);
  const int bwd = compute(OpKind::kBackward, micro, ComputeStage::kEmbedding, -1, {}, {emb}, {});
  reduce_scatter_waits(micro);
  reduce_scatter_start(micro, emb, bwd);
  reduce_scatter_waits(micro);
  if (!s_.grads_partitioned) replica_start(micro, emb);
}

}  // namespace strata
