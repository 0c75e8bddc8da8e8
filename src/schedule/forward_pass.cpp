// The builder's forward pass: each stage's gathers issued ahead of its compute, the loss reduced
// after the head, the hpZ secondary copy kept for backward, each gathered copy released after use.
#include "schedule/schedule_builder.hpp"

namespace strata {

// Forward compute stages in order, each with the units whose weights it reads.
std::vector<ScheduleBuilder::Stage> ScheduleBuilder::forward_stages() const {
  const ModelLayout& lay = *in_.layout;
  const auto emb = static_cast<int>(ModelLayout::kEmbeddingUnit);
  std::vector<Stage> s;
  s.push_back({ComputeStage::kEmbedding, -1, {emb}});
  for (int l = 0; l < lay.config().n_layer; ++l) s.push_back({ComputeStage::kBlock, l, {static_cast<int>(lay.block_unit(l))}});
  s.push_back({ComputeStage::kHead, -1, {static_cast<int>(lay.final_norm_unit()), emb}});
  return s;
}

void ScheduleBuilder::loss_reduce(int micro, int head_forward) {
  ScheduleOp op = make(OpKind::kLossReduce, micro, -1);
  op.comm = {CollectiveKind::kControlSum, 0, top_, 1, DType::kF64};
  op.deps = {head_forward};
  last_loss_reduce_ = add(op);
}

void ScheduleBuilder::forward_pass(int micro, bool training) {
  for (UnitTimeline& t : units_) t.grad_open = false;
  const auto stages = forward_stages();
  Issuer is;
  for (const Stage& st : stages) is.units.push_back(st.units);
  is.starts.resize(stages.size());
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const Stage& st = stages[i];
    issue_through(micro, is, i, false);
    std::vector<int> waits;
    for (std::size_t k = 0; k < st.units.size(); ++k) waits.push_back(gather_wait(micro, st.units[k], is.starts[i][k]));
    // The next stages' gathers overlap this compute.
    if (in_.prefetch > 0) issue_through(micro, is, i, true);
    const int fwd = compute(OpKind::kForward, micro, st.stage, st.layer, st.units, {}, waits);
    if (st.stage == ComputeStage::kHead) {
      loss_reduce(micro, fwd);
      if (training) {
        head_backward(micro, st);
      } else {
        for (int u : st.units) release(micro, u, {fwd});
      }
      return;
    }
    for (std::size_t k = 0; k < st.units.size(); ++k) {
      const int u = st.units[k];
      std::vector<int> release_deps = {fwd};
      if (training && secondary_in_use() && is_block(u)) {
        ScheduleOp keep = make(OpKind::kKeepSecondary, micro, u);
        keep.alloc.push_back({BufferKind::kSecondary, u, secondary_bytes(u)});
        // Overwrites the copy: the last backward gather that read it must be done.
        keep.deps = {waits[k], unit(u).secondary_read};
        const int id = add(keep);
        unit(u).kept = id;
        release_deps.push_back(id);
      }
      release(micro, u, release_deps);
    }
  }
}

}  // namespace strata
