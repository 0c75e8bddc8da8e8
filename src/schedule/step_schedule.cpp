// Builds the step schedule of a shard plan: the data flow of one optimizer step.
#include "schedule/step_schedule.hpp"

#include "core/error.hpp"

namespace strata {

namespace {

class Builder {
 public:
  explicit Builder(const ScheduleInputs& in) : in_(in), plan_(in.plan), top_(in.topology->level_count() - 1) {}

  StepSchedule build() {
    if (in_.forward_only) {
      forward_pass(0, /*training=*/false);
    } else {
      for (int m = 0; m < in_.grad_accum; ++m) {
        forward_pass(m, true);
        backward_pass(m);
      }
      boundary();
    }
    return std::move(schedule_);
  }

 private:
  static ScheduleOp make(OpKind kind, int micro, int unit, std::vector<int> deps = {},
                         TrafficPhase phase = TrafficPhase::kMicroBatch,
                         WeightSource source = WeightSource::kPrimary) {
    ScheduleOp op;
    op.kind = kind;
    op.micro = micro;
    op.unit = unit;
    op.deps = std::move(deps);
    op.phase = phase;
    op.source = source;
    return op;
  }
  static ScheduleOp compute_op(OpKind kind, int micro, int unit, ComputeStage stage, int layer) {
    ScheduleOp op = make(kind, micro, unit);
    op.stage = stage;
    op.layer = layer;
    return op;
  }

  int add(ScheduleOp op) {
    schedule_.ops.push_back(std::move(op));
    return static_cast<int>(schedule_.ops.size()) - 1;
  }
  std::size_t numel(int unit) const { return in_.padded_numel.at(static_cast<std::size_t>(unit)); }
  bool secondary_in_use() const { return plan_.weights != kReplicated && plan_.has_secondary(); }

  CollectiveSpec gather_spec(int unit, WeightSource source) const {
    const int last = source == WeightSource::kSecondary ? plan_.secondary : plan_.weights;
    return {CollectiveKind::kAllGather, 0, last, numel(unit), in_.weight_dtype};
  }

  // Model FLOPs of a compute stage on this rank's micro-batch: 2 per matrix parameter per token
  // (the tied token table counts at the head), plus 4 T C per token for attention in a block;
  // backward is twice the forward.
  double unit_flops(int unit, ComputeStage stage, double factor) const {
    const auto& u = in_.layout->unit(static_cast<std::size_t>(unit));
    const double tokens = static_cast<double>(in_.tokens_per_micro);
    double matrix = 0;
    if (stage == ComputeStage::kHead) {
      matrix = static_cast<double>(in_.layout->unit(ModelLayout::kEmbeddingUnit).tensor("wte").range.size());
    } else if (stage == ComputeStage::kBlock) {
      for (const auto& t : u.tensors) matrix += t.shape.size() >= 2 ? static_cast<double>(t.range.size()) : 0.0;
      matrix += 2.0 * in_.seq_len * in_.layout->config().n_embd;
    }
    return factor * 2.0 * matrix * tokens;
  }

  // Forward compute stages in order, each with the units whose weights it reads.
  struct Stage {
    ComputeStage stage;
    int layer;
    std::vector<int> units;
  };
  std::vector<Stage> forward_stages() const {
    const ModelLayout& lay = *in_.layout;
    std::vector<Stage> s;
    s.push_back({ComputeStage::kEmbedding, -1, {static_cast<int>(ModelLayout::kEmbeddingUnit)}});
    for (int l = 0; l < lay.config().n_layer; ++l) s.push_back({ComputeStage::kBlock, l, {static_cast<int>(lay.block_unit(l))}});
    s.push_back({ComputeStage::kHead, -1, {static_cast<int>(lay.final_norm_unit()), static_cast<int>(ModelLayout::kEmbeddingUnit)}});
    return s;
  }

  // Replicated weights still get gather and release ops (with no collective): they are where
  // bf16 working weights are widened to fp32 for compute and dropped again.
  void gather_starts(const Stage& st, int micro, WeightSource source, std::vector<int>& starts) {
    for (int u : st.units) {
      ScheduleOp op = make(OpKind::kGatherStart, micro, u);
      op.source = source;
      op.comm = gather_spec(u, source);
      starts.push_back(add(op));
    }
  }

  void forward_pass(int micro, bool training) {
    const auto stages = forward_stages();
    std::vector<int> pending;
    gather_starts(stages[0], micro, WeightSource::kPrimary, pending);
    int previous = -1;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      const Stage& st = stages[i];
      std::vector<int> waits;
      for (std::size_t k = 0; k < pending.size(); ++k) {
        waits.push_back(add(make(OpKind::kGatherWait, micro, st.units[k], {pending[k]}, TrafficPhase::kMicroBatch, WeightSource::kPrimary)));
      }
      pending.clear();
      // Prefetch: the next stage's gathers start before this stage computes.
      const bool is_last = i + 1 == stages.size();
      if (!is_last && in_.prefetch) gather_starts(stages[i + 1], micro, WeightSource::kPrimary, pending);
      ScheduleOp fwd = compute_op(OpKind::kForward, micro, st.units.front(), st.stage, st.layer);
      fwd.flops = unit_flops(st.units.front(), st.stage, 1.0);
      fwd.deps = waits;
      if (previous >= 0) fwd.deps.push_back(previous);
      previous = add(fwd);
      if (st.stage == ComputeStage::kHead && training) {
        head_backward(micro, st, previous);
        return;
      }
      for (int u : st.units) {
        if (training && secondary_in_use() && st.stage == ComputeStage::kBlock) {
          add(make(OpKind::kKeepSecondary, micro, u, {previous}, TrafficPhase::kMicroBatch, WeightSource::kPrimary));
        }
        add(make(OpKind::kRelease, micro, u, {previous}, TrafficPhase::kMicroBatch, WeightSource::kPrimary));
      }
      if (!is_last && !in_.prefetch) gather_starts(stages[i + 1], micro, WeightSource::kPrimary, pending);
    }
  }

  int reduce_scatter_grads(int micro, int unit, int after) {
    ScheduleOp op = make(OpKind::kReduceScatterGrads, micro, unit);
    op.comm = {CollectiveKind::kReduceScatter, 0, plan_.grads, numel(unit), in_.grad_dtype};
    op.deps = {after};
    return add(op);
  }

  void head_backward(int micro, const Stage& head, int forward_op) {
    const ModelLayout& lay = *in_.layout;
    ScheduleOp bwd = compute_op(OpKind::kBackward, micro, head.units.front(), ComputeStage::kHead, -1);
    bwd.flops = unit_flops(head.units.front(), ComputeStage::kHead, 2.0);
    bwd.deps = {forward_op};
    last_backward_ = add(bwd);
    reduce_scatter_grads(micro, static_cast<int>(lay.final_norm_unit()), last_backward_);
    for (int u : head.units) {
      add(make(OpKind::kRelease, micro, u, {last_backward_}, TrafficPhase::kMicroBatch, WeightSource::kPrimary));
    }
  }

  void backward_pass(int micro) {
    const ModelLayout& lay = *in_.layout;
    const WeightSource source = secondary_in_use() ? WeightSource::kSecondary : WeightSource::kPrimary;
    const int layers = lay.config().n_layer;
    std::vector<int> pending;
    auto start = [&](int l) {
      if (l < 0) return;
      ScheduleOp op = make(OpKind::kGatherStart, micro, static_cast<int>(lay.block_unit(l)));
      op.source = source;
      op.comm = gather_spec(op.unit, source);
      pending.push_back(add(op));
    };
    start(layers - 1);
    for (int l = layers - 1; l >= 0; --l) {
      const int u = static_cast<int>(lay.block_unit(l));
      std::vector<int> deps = {last_backward_};
      for (int p : pending) {
        deps.push_back(add(make(OpKind::kGatherWait, micro, u, {p}, TrafficPhase::kMicroBatch, source)));
      }
      pending.clear();
      if (in_.prefetch) start(l - 1);
      ScheduleOp bwd = compute_op(OpKind::kBackward, micro, u, ComputeStage::kBlock, l);
      bwd.flops = unit_flops(u, ComputeStage::kBlock, 2.0);
      bwd.deps = deps;
      last_backward_ = add(bwd);
      add(make(OpKind::kRelease, micro, u, {last_backward_}, TrafficPhase::kMicroBatch, source));
      reduce_scatter_grads(micro, u, last_backward_);
      if (!in_.prefetch) start(l - 1);
    }
    ScheduleOp emb = compute_op(OpKind::kBackward, micro, static_cast<int>(ModelLayout::kEmbeddingUnit), ComputeStage::kEmbedding, -1);
    emb.deps = {last_backward_};
    last_backward_ = add(emb);
    reduce_scatter_grads(micro, emb.unit, last_backward_);
  }

  void boundary() {
    const std::size_t units = in_.layout->unit_count();
    std::vector<int> reduced;
    for (std::size_t u = 0; u < units; ++u) {
      ScheduleOp op = make(OpKind::kReduceReplicas, -1, static_cast<int>(u));
      op.phase = TrafficPhase::kStepBoundary;
      const std::size_t shard = numel(op.unit) / static_cast<std::size_t>(in_.topology->span(plan_.grads));
      const std::size_t slice = numel(op.unit) / static_cast<std::size_t>(in_.topology->span(plan_.optimizer));
      op.comm = {CollectiveKind::kReduceScatter, plan_.grads + 1, plan_.optimizer, shard, in_.grad_dtype};
      op.comm2 = {CollectiveKind::kAllReduce, plan_.optimizer + 1, top_, slice, in_.grad_dtype};
      reduced.push_back(add(op));
    }
    const int norm = add(make(OpKind::kGradNorm, -1, -1, reduced, TrafficPhase::kStepBoundary, WeightSource::kPrimary));
    std::vector<int> gathered;
    for (std::size_t u = 0; u < units; ++u) {
      const int step = add(make(OpKind::kOptimizerStep, -1, static_cast<int>(u), {norm}, TrafficPhase::kStepBoundary, WeightSource::kPrimary));
      ScheduleOp ag = make(OpKind::kGatherUpdated, -1, static_cast<int>(u));
      ag.phase = TrafficPhase::kStepBoundary;
      const std::size_t primary = numel(ag.unit) / static_cast<std::size_t>(in_.topology->span(plan_.weights));
      ag.comm = {CollectiveKind::kAllGather, plan_.weights + 1, plan_.optimizer, primary, in_.weight_dtype};
      ag.deps = {step};
      gathered.push_back(add(ag));
    }
    add(make(OpKind::kBumpEpoch, -1, -1, gathered, TrafficPhase::kStepBoundary, WeightSource::kPrimary));
  }

  const ScheduleInputs& in_;
  const ShardPlan& plan_;
  int top_;
  int last_backward_ = -1;
  StepSchedule schedule_;
};

}  // namespace

std::vector<std::uint64_t> collective_bytes_by_level(const Topology& t, const CollectiveSpec& c) {
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(t.level_count()), 0);
  if (c.empty()) return bytes;
  const int passes = c.kind == CollectiveKind::kAllReduce ? 2 : 1;
  std::size_t block = c.elements;  // the block still being split (reduce) or assembled (gather)
  for (int l = c.first_level; l <= c.last_level; ++l) {
    const auto f = static_cast<std::size_t>(t.level(l).fanout);
    const std::size_t piece = block / f;
    bytes[static_cast<std::size_t>(l)] += passes * (f - 1) * piece * dtype_size(c.dtype);
    block = piece;
  }
  return bytes;
}

std::vector<std::uint64_t> StepSchedule::bytes_by_level(const Topology& t, TrafficPhase phase) const {
  std::vector<std::uint64_t> total(static_cast<std::size_t>(t.level_count()), 0);
  for (const ScheduleOp& op : ops) {
    if (op.phase != phase) continue;
    for (const CollectiveSpec* c : {&op.comm, &op.comm2}) {
      const auto b = collective_bytes_by_level(t, *c);
      for (std::size_t l = 0; l < b.size(); ++l) total[l] += b[l];
    }
  }
  return total;
}

std::string op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kGatherStart: return "gather_start";
    case OpKind::kGatherWait: return "gather_wait";
    case OpKind::kKeepSecondary: return "keep_secondary";
    case OpKind::kRelease: return "release";
    case OpKind::kForward: return "forward";
    case OpKind::kBackward: return "backward";
    case OpKind::kReduceScatterGrads: return "reduce_scatter_grads";
    case OpKind::kReduceReplicas: return "reduce_replicas";
    case OpKind::kGradNorm: return "grad_norm";
    case OpKind::kOptimizerStep: return "optimizer_step";
    case OpKind::kGatherUpdated: return "gather_updated";
    case OpKind::kBumpEpoch: return "bump_epoch";
  }
  return "?";
}

StepSchedule build_step_schedule(const ScheduleInputs& in) {
  STRATA_REQUIRE(in.layout != nullptr && in.topology != nullptr, "schedule inputs need a layout and a topology");
  STRATA_REQUIRE(in.padded_numel.size() == in.layout->unit_count(), "schedule inputs: one padded size per unit");
  return Builder(in).build();
}

}  // namespace strata
