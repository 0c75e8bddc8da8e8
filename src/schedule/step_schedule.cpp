// Builds the step schedule of a shard plan: the data flow of one optimizer step (or several), with
// every dependency a correct execution needs, written once here.
#include "schedule/step_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "plan/unit_padding.hpp"

namespace strata {

namespace {

class Builder {
 public:
  explicit Builder(const ScheduleInputs& in)
      : in_(in), plan_(in.plan), top_(in.topology->level_count() - 1) {
    const ModelLayout& lay = *in_.layout;
    s_.padded_numel = padded_unit_sizes(lay, *in_.topology);
    s_.unit_count = static_cast<int>(lay.unit_count());
    for (const auto& u : lay.units()) s_.unit_names.push_back(u.name);
    s_.grads_partitioned = plan_.grads != kReplicated;
    const auto units = static_cast<std::size_t>(s_.unit_count);
    released_.assign(units, -1);
    grad_free_.assign(units, -1);
    grad_writer_.assign(units, -1);
    updated_.assign(units, -1);
    kept_.assign(units, -1);
    secondary_read_.assign(units, -1);
    gathered_live_.assign(units, 0);
  }

  StepSchedule build() {
    resident_state();
    for (int step = 0; step < in_.steps; ++step) {
      step_ = step;
      if (in_.mode == ScheduleMode::kEvaluate) {
        begin_segment(SegmentKind::kEvaluate, -1, fmt::format("step {} evaluation", step));
        forward_pass(0, false);
        continue;
      }
      for (int m = 0; m < in_.grad_accum; ++m) {
        begin_segment(SegmentKind::kMicroBatch, m, fmt::format("step {} micro-batch {}", step, m));
        forward_pass(m, true);
        backward_pass(m);
      }
      boundary();
    }
    end_segment();
    return std::move(s_);
  }

 private:
  // ---- bookkeeping --------------------------------------------------------------------------

  void begin_segment(SegmentKind kind, int micro, std::string name) {
    end_segment();
    const int at = static_cast<int>(s_.ops.size());
    s_.segments.push_back({kind, step_, micro, at, at, std::move(name)});
  }
  void end_segment() {
    if (!s_.segments.empty()) s_.segments.back().end = static_cast<int>(s_.ops.size());
  }

  ScheduleOp make(OpKind kind, int micro, int unit) const {
    ScheduleOp op;
    op.kind = kind;
    op.step = step_;
    op.micro = micro;
    op.unit = unit;
    op.segment = static_cast<int>(s_.segments.size()) - 1;
    op.phase = in_.mode == ScheduleMode::kEvaluate ? TrafficPhase::kOther
               : micro < 0                         ? TrafficPhase::kStepBoundary
                                                   : TrafficPhase::kMicroBatch;
    return op;
  }
  int add(ScheduleOp op) {
    std::sort(op.deps.begin(), op.deps.end());
    op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
    op.deps.erase(std::remove(op.deps.begin(), op.deps.end(), -1), op.deps.end());
    s_.ops.push_back(std::move(op));
    return static_cast<int>(s_.ops.size()) - 1;
  }

  std::size_t numel(int unit) const { return s_.padded_numel.at(static_cast<std::size_t>(unit)); }
  std::size_t span(int level) const { return static_cast<std::size_t>(in_.topology->span(level)); }
  std::uint64_t weight_bytes(std::size_t elements) const { return elements * dtype_size(in_.weight_dtype); }
  bool is_block(int unit) const { return in_.layout->unit(static_cast<std::size_t>(unit)).kind == UnitKind::kBlock; }
  bool secondary_in_use() const { return plan_.weights != kReplicated && plan_.has_secondary(); }

  // The fp32 compute copy, plus the staging area the gather lands in: the blobs of a quantized
  // gather, or the narrow copy of an unquantized bf16 one. Nothing for fp32 weights held whole
  // (compute reads the primary in place).
  std::uint64_t gathered_bytes(int unit, const CollectiveSpec& gather) const {
    const bool narrow = in_.weight_dtype != DType::kF32;
    if (plan_.weights == kReplicated && !narrow) return 0;
    std::uint64_t staging = 0;
    if (gather.quant.enabled()) {
      const auto span = static_cast<std::size_t>(in_.topology->span(gather.first_level, gather.last_level));
      staging = span * quantized_bytes(gather.quant, numel(unit) / span);
    } else if (narrow && plan_.weights != kReplicated) {
      staging = weight_bytes(numel(unit));
    }
    return numel(unit) * sizeof(float) + staging;
  }
  // The plan's format where the collective has peers: over levels spanning one rank nothing moves,
  // and quantizing there would only round the data. A quantized gradient reduction quantizes the
  // fp32 accumulation itself, so its spec says fp32 whatever the wire dtype of plain ones.
  CollectiveSpec with_quant(CollectiveSpec c, QuantFormat f) const {
    if (!f.enabled() || c.last_level < c.first_level || in_.topology->span(c.first_level, c.last_level) == 1) return c;
    c.quant = f;
    if (c.kind != CollectiveKind::kAllGather) c.dtype = DType::kF32;
    return c;
  }

  std::uint64_t secondary_bytes(int unit) const { return weight_bytes(numel(unit) / span(plan_.secondary)); }

  void resident_state() {
    std::uint64_t weights = 0, grads = 0, optim = 0;
    for (int u = 0; u < s_.unit_count; ++u) {
      weights += weight_bytes(numel(u) / span(plan_.weights));
      grads += numel(u) / span(plan_.grads) * sizeof(float);
      optim += numel(u) / span(plan_.optimizer) * 3 * sizeof(float);  // fp32 master, Adam m and v
    }
    auto state = [&](const char* name, int level, std::uint64_t bytes) {
      return ResidentState{name, level, in_.topology->span(level), bytes};
    };
    s_.resident = {state("weights", plan_.weights, weights), state("grads", plan_.grads, grads),
                   state("optimizer", plan_.optimizer, optim)};
  }

  // Model FLOPs of a compute stage on this rank's micro-batch: 2 per matrix parameter per token
  // (the tied token table counts at the head), plus 4 T C per token for attention in a block;
  // backward is twice the forward.
  double stage_flops(ComputeStage stage, int unit, double factor) const {
    const ModelLayout& lay = *in_.layout;
    const double tokens = static_cast<double>(in_.tokens_per_micro);
    double matrix = 0;
    if (stage == ComputeStage::kHead) {
      matrix = static_cast<double>(lay.unit(ModelLayout::kEmbeddingUnit).tensor("wte").range.size());
    } else if (stage == ComputeStage::kBlock) {
      for (const auto& t : lay.unit(static_cast<std::size_t>(unit)).tensors) {
        matrix += t.shape.size() >= 2 ? static_cast<double>(t.range.size()) : 0.0;
      }
      matrix += 2.0 * in_.seq_len * lay.config().n_embd;
    }
    return factor * 2.0 * matrix * tokens;
  }

  // ---- gathers ------------------------------------------------------------------------------

  int gather_start(int micro, int unit, WeightSource source, bool backward) {
    ScheduleOp op = make(OpKind::kGatherStart, micro, unit);
    op.source = source;
    if (plan_.weights != kReplicated) {
      const int last = source == WeightSource::kSecondary ? plan_.secondary : plan_.weights;
      op.comm = with_quant({CollectiveKind::kAllGather, 0, last, numel(unit), in_.weight_dtype},
                           plan_.weight_quant(backward));
    }
    const auto u = static_cast<std::size_t>(unit);
    gathered_live_[u] = gathered_bytes(unit, op.comm);
    if (gathered_live_[u] > 0) op.alloc.push_back({BufferKind::kGathered, unit, gathered_live_[u]});
    op.deps = {released_[u]};  // one gathered buffer per unit: the previous copy must be gone
    if (source == WeightSource::kSecondary) {
      STRATA_CHECK(kept_[u] >= 0, "a gather from the secondary copy of unit {} before it was kept", unit);
      op.deps.push_back(kept_[u]);
    } else {
      op.deps.push_back(updated_[u]);  // the previous step's update wrote the primary
    }
    return add(op);
  }

  int gather_wait(int micro, int unit, int start) {
    ScheduleOp op = make(OpKind::kGatherWait, micro, unit);
    op.source = s_.ops[static_cast<std::size_t>(start)].source;
    op.deps = {start};
    if (op.source == WeightSource::kSecondary) {
      // The secondary shard is in the gathered unit now; it has served its purpose.
      op.free.push_back({BufferKind::kSecondary, unit, secondary_bytes(unit)});
      secondary_read_[static_cast<std::size_t>(unit)] = static_cast<int>(s_.ops.size());
    }
    return add(op);
  }

  int release(int micro, int unit, std::vector<int> deps) {
    ScheduleOp op = make(OpKind::kRelease, micro, unit);
    op.deps = std::move(deps);
    if (const std::uint64_t b = gathered_live_[static_cast<std::size_t>(unit)]; b > 0) {
      op.free.push_back({BufferKind::kGathered, unit, b});
    }
    const int id = add(op);
    released_[static_cast<std::size_t>(unit)] = id;
    return id;
  }

  // ---- compute ------------------------------------------------------------------------------

  int compute(OpKind kind, int micro, ComputeStage stage, int layer, std::vector<int> weight_units,
              std::vector<int> grad_units, std::vector<int> deps) {
    ScheduleOp op = make(kind, micro, weight_units.empty() ? grad_units.front() : weight_units.front());
    op.stage = stage;
    op.layer = layer;
    op.flops = stage_flops(stage, op.unit, kind == OpKind::kBackward ? 2.0 : 1.0);
    op.deps = std::move(deps);
    op.deps.push_back(last_compute_);  // one compute stream and one activation store
    if (kind == OpKind::kForward && stage == ComputeStage::kHead) op.deps.push_back(last_loss_reduce_);  // one loss slot
    for (int u : grad_units) {
      const auto uu = static_cast<std::size_t>(u);
      if (s_.grads_partitioned) {
        if (!grad_open_[uu]) {  // the first writer of this micro-batch's unit gradient
          op.alloc.push_back({BufferKind::kUnitGrad, u, numel(u) * sizeof(float)});
          op.deps.push_back(grad_free_[uu]);
          grad_open_[uu] = true;
        }
      } else {
        op.deps.push_back(grad_writer_[uu]);
        grad_writer_[uu] = static_cast<int>(s_.ops.size());
      }
    }
    op.weight_units = std::move(weight_units);
    op.grad_units = std::move(grad_units);
    last_compute_ = add(op);
    return last_compute_;
  }

  void loss_reduce(int micro, int head_forward) {
    ScheduleOp op = make(OpKind::kLossReduce, micro, -1);
    op.comm = {CollectiveKind::kControlSum, 0, top_, 1, DType::kF64};
    op.deps = {head_forward};
    last_loss_reduce_ = add(op);
  }

  // Forward compute stages in order, each with the units whose weights it reads.
  struct Stage {
    ComputeStage stage;
    int layer;
    std::vector<int> units;
  };
  std::vector<Stage> forward_stages() const {
    const ModelLayout& lay = *in_.layout;
    const auto emb = static_cast<int>(ModelLayout::kEmbeddingUnit);
    std::vector<Stage> s;
    s.push_back({ComputeStage::kEmbedding, -1, {emb}});
    for (int l = 0; l < lay.config().n_layer; ++l) s.push_back({ComputeStage::kBlock, l, {static_cast<int>(lay.block_unit(l))}});
    s.push_back({ComputeStage::kHead, -1, {static_cast<int>(lay.final_norm_unit()), emb}});
    return s;
  }

  void forward_pass(int micro, bool training) {
    grad_open_.assign(static_cast<std::size_t>(s_.unit_count), false);
    const auto stages = forward_stages();
    std::vector<int> pending;
    auto start_stage = [&](const Stage& st) {
      for (int u : st.units) pending.push_back(gather_start(micro, u, WeightSource::kPrimary, false));
    };
    start_stage(stages[0]);
    for (std::size_t i = 0; i < stages.size(); ++i) {
      const Stage& st = stages[i];
      std::vector<int> waits;
      for (std::size_t k = 0; k < pending.size(); ++k) waits.push_back(gather_wait(micro, st.units[k], pending[k]));
      pending.clear();
      const bool is_last = i + 1 == stages.size();
      if (!is_last && in_.prefetch) start_stage(stages[i + 1]);  // the next stage's gathers overlap this compute
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
          keep.deps = {waits[k], secondary_read_[static_cast<std::size_t>(u)]};
          const int id = add(keep);
          kept_[static_cast<std::size_t>(u)] = id;
          release_deps.push_back(id);
        }
        release(micro, u, release_deps);
      }
      if (!is_last && !in_.prefetch) start_stage(stages[i + 1]);
    }
  }

  // ---- backward and gradient reduction ------------------------------------------------------

  void reduce_scatter_start(int micro, int unit, int backward) {
    if (!s_.grads_partitioned) return;
    ScheduleOp op = make(OpKind::kReduceScatterStart, micro, unit);
    op.comm = with_quant({CollectiveKind::kReduceScatter, 0, plan_.grads, numel(unit), in_.grad_dtype},
                         plan_.grad_quant());
    op.deps = {backward};
    in_flight_.push_back(add(op));
  }
  // Waits for every reduce-scatter in flight: called after the next backward compute, so each
  // unit's reduction overlaps the backward of the unit before it.
  void reduce_scatter_waits(int micro) {
    for (int start : in_flight_) {
      const int unit = s_.ops[static_cast<std::size_t>(start)].unit;
      const auto u = static_cast<std::size_t>(unit);
      ScheduleOp op = make(OpKind::kReduceScatterWait, micro, unit);
      op.deps = {start, grad_writer_[u]};  // accumulation into the shard in a fixed order
      op.free.push_back({BufferKind::kUnitGrad, unit, numel(unit) * sizeof(float)});
      const int id = add(op);
      grad_writer_[u] = id;
      grad_free_[u] = id;
      grad_open_[u] = false;
    }
    in_flight_.clear();
  }

  void head_backward(int micro, const Stage& head) {
    const int bwd = compute(OpKind::kBackward, micro, ComputeStage::kHead, -1, head.units, head.units, {});
    for (int u : head.units) release(micro, u, {bwd});
    // The embedding's gradient is complete only after the lookup's backward, at the very end.
    reduce_scatter_start(micro, head.units.front(), bwd);
  }

  void backward_pass(int micro) {
    const ModelLayout& lay = *in_.layout;
    const WeightSource source = secondary_in_use() ? WeightSource::kSecondary : WeightSource::kPrimary;
    const int layers = lay.config().n_layer;
    int pending = -1;
    auto start = [&](int l) {
      if (l >= 0) pending = gather_start(micro, static_cast<int>(lay.block_unit(l)), source, true);
    };
    start(layers - 1);
    for (int l = layers - 1; l >= 0; --l) {
      const int u = static_cast<int>(lay.block_unit(l));
      const int wait = gather_wait(micro, u, pending);
      pending = -1;
      if (in_.prefetch) start(l - 1);
      const int bwd = compute(OpKind::kBackward, micro, ComputeStage::kBlock, l, {u}, {u}, {wait});
      reduce_scatter_waits(micro);  // those started before this compute
      release(micro, u, {bwd});
      reduce_scatter_start(micro, u, bwd);
      if (!in_.prefetch) start(l - 1);
    }
    const auto emb = static_cast<int>(ModelLayout::kEmbeddingUnit);
    const int bwd = compute(OpKind::kBackward, micro, ComputeStage::kEmbedding, -1, {}, {emb}, {});
    reduce_scatter_waits(micro);
    reduce_scatter_start(micro, emb, bwd);
    reduce_scatter_waits(micro);
  }

  // ---- the step boundary --------------------------------------------------------------------

  void boundary() {
    begin_segment(SegmentKind::kBoundaryReduce, -1, fmt::format("step {} boundary reduction", step_));
    for (int u = 0; u < s_.unit_count; ++u) {
      const auto uu = static_cast<std::size_t>(u);
      if (plan_.optimizer > plan_.grads) {
        ScheduleOp op = make(OpKind::kReduceScatterReplicas, -1, u);
        op.comm = with_quant({CollectiveKind::kReduceScatter, plan_.grads + 1, plan_.optimizer,
                              numel(u) / span(plan_.grads), in_.grad_dtype},
                             plan_.grad_quant());
        op.deps = {grad_writer_[uu]};
        grad_writer_[uu] = add(op);
      }
      if (plan_.optimizer < top_) {
        ScheduleOp op = make(OpKind::kAllReduceReplicas, -1, u);
        op.comm = with_quant({CollectiveKind::kAllReduce, plan_.optimizer + 1, top_, numel(u) / span(plan_.optimizer),
                              in_.grad_dtype},
                             plan_.grad_quant());
        op.deps = {grad_writer_[uu]};
        grad_writer_[uu] = add(op);
      }
    }
    ScheduleOp norm = make(OpKind::kGradNorm, -1, -1);
    norm.comm = {CollectiveKind::kControlSum, 0, plan_.optimizer, 1, DType::kF64};
    norm.deps = grad_writer_;
    const int norm_id = add(norm);

    begin_segment(SegmentKind::kBoundaryUpdate, -1, fmt::format("step {} update", step_));
    std::vector<int> gathered;
    for (int u = 0; u < s_.unit_count; ++u) {
      const auto uu = static_cast<std::size_t>(u);
      ScheduleOp step = make(OpKind::kOptimizerStep, -1, u);
      step.deps = {norm_id};
      const int step_id = add(step);
      ScheduleOp ag = make(OpKind::kGatherUpdated, -1, u);
      // Empty (no levels) when the optimizer slice already covers the primary shard; the spec
      // still says what lands there. Never quantized: it writes the primary shard itself, and
      // quantizing it would make the rounding permanent.
      ag.comm = {CollectiveKind::kAllGather, plan_.weights + 1, plan_.optimizer, numel(u) / span(plan_.weights),
                 in_.weight_dtype};
      // Overwrites the primary shard: every gather that reads it must have finished.
      ag.deps = {step_id, last_compute_};
      updated_[uu] = add(ag);
      gathered.push_back(updated_[uu]);
      grad_writer_[uu] = step_id;  // the next step starts from zeroed gradients after the update
    }
    ScheduleOp bump = make(OpKind::kBumpEpoch, -1, -1);
    bump.deps = gathered;
    add(bump);
  }

  const ScheduleInputs& in_;
  const ShardPlan& plan_;
  int top_;
  int step_ = 0;
  StepSchedule s_;
  int last_compute_ = -1;
  int last_loss_reduce_ = -1;
  std::vector<int> released_;       // per unit: the release of its last gathered copy
  std::vector<int> grad_free_;      // per unit: the wait that freed its last unit-gradient buffer
  std::vector<int> grad_writer_;    // per unit: the last op that wrote its gradient shard
  std::vector<int> updated_;        // per unit: the last update of its primary shard
  std::vector<int> kept_;           // per unit: the last keep_secondary
  std::vector<int> secondary_read_; // per unit: the last gather wait that read the secondary copy
  std::vector<std::uint64_t> gathered_live_;  // per unit: bytes its last gather allocated
  std::vector<bool> grad_open_;     // per unit: a unit-gradient buffer of this micro-batch is live
  std::vector<int> in_flight_;      // reduce-scatter starts not yet waited for
};

}  // namespace

std::string op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kGatherStart: return "gather_start";
    case OpKind::kGatherWait: return "gather_wait";
    case OpKind::kKeepSecondary: return "keep_secondary";
    case OpKind::kRelease: return "release";
    case OpKind::kForward: return "forward";
    case OpKind::kBackward: return "backward";
    case OpKind::kLossReduce: return "loss_reduce";
    case OpKind::kReduceScatterStart: return "reduce_scatter_start";
    case OpKind::kReduceScatterWait: return "reduce_scatter_wait";
    case OpKind::kReduceScatterReplicas: return "reduce_scatter_replicas";
    case OpKind::kAllReduceReplicas: return "all_reduce_replicas";
    case OpKind::kGradNorm: return "grad_norm";
    case OpKind::kOptimizerStep: return "optimizer_step";
    case OpKind::kGatherUpdated: return "gather_updated";
    case OpKind::kBumpEpoch: return "bump_epoch";
  }
  return "?";
}

std::string buffer_kind_name(BufferKind kind) {
  switch (kind) {
    case BufferKind::kGathered: return "gathered weights";
    case BufferKind::kSecondary: return "secondary copy";
    case BufferKind::kUnitGrad: return "unit gradient";
    case BufferKind::kCount: break;
  }
  return "?";
}

std::string describe_op(const StepSchedule& s, int index) {
  if (index < 0 || index >= static_cast<int>(s.ops.size())) return fmt::format("op {} (not in the list)", index);
  const ScheduleOp& op = s.ops[static_cast<std::size_t>(index)];
  std::string what = op_kind_name(op.kind);
  if (op.unit >= 0 && op.unit < static_cast<int>(s.unit_names.size())) {
    what += " of " + s.unit_names[static_cast<std::size_t>(op.unit)];
  }
  if (op.source == WeightSource::kSecondary && (op.kind == OpKind::kGatherStart || op.kind == OpKind::kGatherWait)) {
    what += " from the secondary copy";
  }
  const std::string when = op.micro >= 0 ? fmt::format("step {} micro-batch {}", op.step, op.micro)
                                         : fmt::format("step {} boundary", op.step);
  return fmt::format("op {} ({}, {})", index, what, when);
}

StepSchedule build_step_schedule(const ScheduleInputs& in) {
  STRATA_REQUIRE(in.layout != nullptr && in.topology != nullptr, "schedule inputs need a layout and a topology");
  STRATA_REQUIRE(in.grad_accum >= 1 && in.steps >= 1, "a schedule needs at least one micro-batch and one step");
  in.plan.validate(*in.topology);
  return Builder(in).build();
}

}  // namespace strata
