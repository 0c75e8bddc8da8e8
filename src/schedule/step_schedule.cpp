// Builds the step schedule of a shard plan: the data flow of one optimizer step (or several), with
// every dependency a correct execution needs, written once here.
#include "schedule/step_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "plan/shard_layout.hpp"
#include "plan/unit_padding.hpp"

namespace strata {

namespace {

class Builder {
 public:
  explicit Builder(const ScheduleInputs& in)
      : in_(in), plan_(in.plan), top_(in.topology->level_count() - 1), shards_(*in.layout, *in.topology, in.plan, 0) {
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
    issued_.assign(units, false);
    overlap_ = in_.boundary_overlap && in_.mode == ScheduleMode::kTrain;
    // The list is run once per step: its first step waits for the updates the previous run of it
    // started (none before the first step: the wait then finds nothing to wait for).
    update_pending_.assign(units, {});
    update_carried_in_.assign(units, overlap_);
    replica_pending_.assign(units, {});
    gather_starts_.assign(units, {});
    check_live_bound();
  }

  // The bound must let the largest stage be gathered alone (the head holds two units at once).
  void check_live_bound() const {
    if (in_.max_live_bytes == 0) return;
    const ModelLayout& lay = *in_.layout;
    std::uint64_t need = 0;
    std::string what;
    auto consider = [&](const std::vector<int>& units, WeightSource source, bool backward, const std::string& name) {
      const std::uint64_t b = stage_bytes(units, source, backward);
      if (b > need) need = b, what = name;
    };
    for (const Stage& st : forward_stages()) {
      consider(st.units, WeightSource::kPrimary, false,
               st.stage == ComputeStage::kHead ? "the head (final norm and token table)" : s_.unit_names[static_cast<std::size_t>(st.units[0])]);
    }
    if (in_.mode == ScheduleMode::kTrain) {
      const WeightSource source = secondary_in_use() ? WeightSource::kSecondary : WeightSource::kPrimary;
      for (int l = 0; l < lay.config().n_layer; ++l) {
        const int u = static_cast<int>(lay.block_unit(l));
        consider({u}, source, true, s_.unit_names[static_cast<std::size_t>(u)] + " in backward");
      }
    }
    STRATA_REQUIRE(in_.max_live_bytes >= need,
                   "max-live-bytes {} is below the {} bytes that {} needs gathered at once; the bound must hold at "
                   "least the largest stage",
                   in_.max_live_bytes, need, what);
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
    if (buckets_of(gather).size() > 1) {
      // Buckets land in the compute copy through collective scratch: no staging area of the unit.
    } else if (gather.quant.enabled()) {
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
  // And flat when the plan says so, except for qgZ reductions, which are two-hop by definition.
  CollectiveSpec with_quant(CollectiveSpec c, QuantFormat f) const {
    c = flat_if_planned(c);
    if (!f.enabled() || c.last_level < c.first_level || in_.topology->span(c.first_level, c.last_level) == 1) return c;
    c.quant = f;
    if (c.kind != CollectiveKind::kAllGather) {
      c.dtype = DType::kF32;
      c.flat = false;
    }
    return c;
  }
  CollectiveSpec flat_if_planned(CollectiveSpec c) const {
    c.flat = plan_.collectives == CollectiveAlgorithm::kFlat && !c.is_control() && c.kind != CollectiveKind::kNone;
    return c;
  }

  // The collective as the plan's buckets, one spec per call of at most the plan's bucket size for
  // its kind (gathers, or reductions): a part of
  // every rank's piece (gather, reduce-scatter) or of the buffer (all-reduce), a multiple of the
  // quantization block, so the blocks are those of the whole collective.
  std::vector<CollectiveSpec> buckets_of(const CollectiveSpec& c) const {
    const std::uint64_t limit = c.kind == CollectiveKind::kAllGather ? plan_.gather_bucket_bytes : plan_.reduce_bucket_bytes;
    if (limit == 0 || c.kind == CollectiveKind::kNone || c.empty()) return {c};
    const auto span = static_cast<std::size_t>(in_.topology->span(c.first_level, c.last_level));
    const std::size_t eb = dtype_size(c.dtype), align = c.quant.enabled() ? c.quant.block : 1;
    std::vector<CollectiveSpec> out;
    if (c.kind == CollectiveKind::kAllReduce) {
      const std::size_t step = span * align;
      const std::size_t k = std::max<std::size_t>(1, limit / eb / step) * step;
      if (k >= c.elements) return {c};
      for (std::size_t o = 0; o < c.elements; o += k) {
        CollectiveSpec b = c;
        b.elements = std::min(k, c.elements - o);
        b.bucket_offset = o;
        b.bucket_piece = c.elements;
        out.push_back(b);
      }
      return out;
    }
    const std::size_t piece = c.elements / span;
    const std::size_t k = std::max<std::size_t>(1, limit / (eb * span) / align) * align;
    if (k >= piece) return {c};
    for (std::size_t o = 0; o < piece; o += k) {
      CollectiveSpec b = c;
      b.elements = span * std::min(k, piece - o);
      b.bucket_offset = o;
      b.bucket_piece = piece;
      out.push_back(b);
    }
    return out;
  }

  // A start for each bucket of `spec`, in order (each after the one before), from `first` (the
  // op of bucket 0, its other fields set). Returns the ops' ids.
  std::vector<int> add_bucket_starts(ScheduleOp first, const CollectiveSpec& spec) {
    const std::vector<CollectiveSpec> specs = buckets_of(spec);
    std::vector<int> ids;
    for (std::size_t b = 0; b < specs.size(); ++b) {
      ScheduleOp op = first;
      op.comm = specs[b];
      op.bucket = static_cast<int>(b);
      op.buckets = static_cast<int>(specs.size());
      if (b > 0) {
        op.alloc.clear();
        op.deps = {ids.back()};
      }
      ids.push_back(add(op));
    }
    return ids;
  }

  // A wait for each of `starts` (a bucketed start's ops), each after its start and the wait
  // before; `last` (effects such as frees) goes on the final one. Returns the final wait's id.
  int add_bucket_waits(OpKind kind, int micro, int unit, const std::vector<int>& starts, std::vector<int> deps,
                       ScheduleOp last) {
    int prev = -1;
    for (std::size_t b = 0; b < starts.size(); ++b) {
      const ScheduleOp& start = s_.ops[static_cast<std::size_t>(starts[b])];
      ScheduleOp op = b + 1 == starts.size() ? last : make(kind, micro, unit);
      op.kind = kind;
      op.micro = micro;
      op.unit = unit;
      op.source = start.source;
      op.phase = start.phase;
      op.comm = no_bytes(start.comm);
      op.bucket = start.bucket;
      op.buckets = start.buckets;
      op.deps = deps;
      op.deps.push_back(starts[b]);
      // After every bucket started: the buckets share one buffer, which the starts write in
      // flight and the waits make whole, in order.
      op.deps.push_back(b == 0 ? starts.back() : prev);
      prev = add(op);
    }
    return prev;
  }

  std::uint64_t secondary_bytes(int unit) const { return weight_bytes(shards_.unit(unit).secondary.len); }

  void resident_state() {
    const std::uint64_t weights = weight_bytes(shards_.weight_elements());
    const std::uint64_t grads = shards_.grad_elements() * sizeof(float);
    const std::uint64_t optim = shards_.optimizer_elements() * 3 * sizeof(float);  // fp32 master, Adam m and v
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

  CollectiveSpec gather_spec(int unit, WeightSource source, bool backward) const {
    if (plan_.weights == kReplicated) return {};
    const int last = source == WeightSource::kSecondary ? plan_.secondary : plan_.weights;
    return with_quant({CollectiveKind::kAllGather, 0, last, numel(unit), in_.weight_dtype}, plan_.weight_quant(backward));
  }

  // The updated-weights gather of the step before (each of its buckets), waited for just before
  // the unit's first gather of this step reads the primary shard it writes. In the list's first
  // step the starts are the previous run's: the waits are carried.
  void await_update(int micro, int unit) {
    const auto u = static_cast<std::size_t>(unit);
    if (!update_carried_in_[u] && update_pending_[u].empty()) return;
    if (update_carried_in_[u]) {
      const std::vector<CollectiveSpec> specs = buckets_of(updated_spec(unit));
      int prev = -1;
      for (std::size_t b = 0; b < specs.size(); ++b) {
        ScheduleOp op = make(OpKind::kGatherUpdatedWait, micro, unit);
        op.carried = true;
        op.comm = no_bytes(specs[b]);
        op.bucket = static_cast<int>(b);
        op.buckets = static_cast<int>(specs.size());
        op.deps = {prev};
        prev = add(op);
      }
      updated_[u] = prev;
      update_carried_in_[u] = false;
      return;
    }
    updated_[u] = add_bucket_waits(OpKind::kGatherUpdatedWait, micro, unit, update_pending_[u], {},
                                   make(OpKind::kGatherUpdatedWait, micro, unit));
    update_pending_[u].clear();
  }

  int gather_start(int micro, int unit, WeightSource source, bool backward) {
    if (source == WeightSource::kPrimary) await_update(micro, unit);
    ScheduleOp op = make(OpKind::kGatherStart, micro, unit);
    op.source = source;
    op.comm = gather_spec(unit, source, backward);
    const auto u = static_cast<std::size_t>(unit);
    gathered_live_[u] = gathered_bytes(unit, op.comm);
    if (gathered_live_[u] > 0) op.alloc.push_back({BufferKind::kGathered, unit, gathered_live_[u]});
    live_gathered_ += gathered_live_[u];
    issued_[u] = true;
    // One gathered buffer per unit: the previous copy must be gone. Starts run in list order and
    // releases too (below), so the live bytes of any valid order are at most the list order's.
    op.deps = {released_[u], last_gather_start_, last_release_};
    if (source == WeightSource::kSecondary) {
      STRATA_CHECK(kept_[u] >= 0, "a gather from the secondary copy of unit {} before it was kept", unit);
      op.deps.push_back(kept_[u]);
    } else {
      op.deps.push_back(updated_[u]);  // the previous step's update wrote the primary
    }
    const CollectiveSpec spec = op.comm;
    const std::vector<int> ids = add_bucket_starts(std::move(op), spec);
    gather_starts_[u] = ids;
    last_gather_start_ = ids.back();
    return ids.front();
  }

  int gather_wait(int micro, int unit, int start) {
    const auto u = static_cast<std::size_t>(unit);
    STRATA_CHECK(!gather_starts_[u].empty() && gather_starts_[u].front() == start, "a gather wait of unit {} for another start",
                 unit);
    ScheduleOp last = make(OpKind::kGatherWait, micro, unit);
    if (s_.ops[static_cast<std::size_t>(start)].source == WeightSource::kSecondary) {
      // The secondary shard is in the gathered unit now; it has served its purpose.
      last.free.push_back({BufferKind::kSecondary, unit, secondary_bytes(unit)});
    }
    const int id = add_bucket_waits(OpKind::kGatherWait, micro, unit, gather_starts_[u], {}, std::move(last));
    if (s_.ops[static_cast<std::size_t>(start)].source == WeightSource::kSecondary) secondary_read_[u] = id;
    gather_starts_[u].clear();
    return id;
  }

  int release(int micro, int unit, std::vector<int> deps) {
    ScheduleOp op = make(OpKind::kRelease, micro, unit);
    op.deps = std::move(deps);
    op.deps.push_back(last_release_);
    const auto u = static_cast<std::size_t>(unit);
    if (const std::uint64_t b = gathered_live_[u]; b > 0) op.free.push_back({BufferKind::kGathered, unit, b});
    live_gathered_ -= gathered_live_[u];
    gathered_live_[u] = 0;
    issued_[u] = false;
    const int id = add(op);
    released_[u] = id;
    last_release_ = id;
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

  // ---- gather issue with a prefetch depth and a live-memory bound ---------------------------------

  // Issues the gathers of stages in order: stage i is started at the latest before its compute
  // needs it; with prefetch depth d, stages up to i + d are started before stage i computes, as
  // long as the gathered-but-not-released bytes stay within the bound and no unit of the stage is
  // still gathered from an earlier stage (one gathered copy per unit).
  struct Issuer {
    std::vector<std::vector<int>> units;  // per stage
    std::vector<std::vector<int>> starts; // per stage: its gather starts, once issued
    std::size_t next = 0;                 // the first stage not issued
    WeightSource source = WeightSource::kPrimary;
    bool backward = false;
  };

  std::uint64_t stage_bytes(const std::vector<int>& units, WeightSource source, bool backward) const {
    std::uint64_t b = 0;
    for (int u : units) b += gathered_bytes(u, gather_spec(u, source, backward));
    return b;
  }

  bool can_issue(const Issuer& is, std::size_t stage) const {
    for (int u : is.units[stage]) {
      if (issued_[static_cast<std::size_t>(u)]) return false;
    }
    return in_.max_live_bytes == 0 ||
           live_gathered_ + stage_bytes(is.units[stage], is.source, is.backward) <= in_.max_live_bytes;
  }

  void issue_stage(int micro, Issuer& is) {
    const std::size_t stage = is.next++;
    for (int u : is.units[stage]) is.starts[stage].push_back(gather_start(micro, u, is.source, is.backward));
  }

  // Before stage `i` computes: stage i must be issued (the bound was checked to allow one stage
  // alone), then up to i + depth as far as the bound allows.
  void issue_through(int micro, Issuer& is, std::size_t i, bool prefetch) {
    while (is.next <= i) {
      STRATA_CHECK(can_issue(is, is.next), "stage {} cannot be gathered within the live-memory bound", is.next);
      issue_stage(micro, is);
    }
    if (!prefetch) return;
    const std::size_t last = std::min(is.units.size() - 1, i + static_cast<std::size_t>(in_.prefetch));
    while (is.next <= last && can_issue(is, is.next)) issue_stage(micro, is);
  }

  void forward_pass(int micro, bool training) {
    grad_open_.assign(static_cast<std::size_t>(s_.unit_count), false);
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
          keep.deps = {waits[k], secondary_read_[static_cast<std::size_t>(u)]};
          const int id = add(keep);
          kept_[static_cast<std::size_t>(u)] = id;
          release_deps.push_back(id);
        }
        release(micro, u, release_deps);
      }
    }
  }

  // ---- backward and gradient reduction ------------------------------------------------------

  void reduce_scatter_start(int micro, int unit, int backward) {
    if (!s_.grads_partitioned) return;
    ScheduleOp op = make(OpKind::kReduceScatterStart, micro, unit);
    const CollectiveSpec spec =
        with_quant({CollectiveKind::kReduceScatter, 0, plan_.grads, numel(unit), in_.grad_dtype}, plan_.grad_quant());
    op.deps = {backward};
    in_flight_.push_back(add_bucket_starts(std::move(op), spec));
  }
  // Waits for every reduce-scatter in flight: called after the next backward compute, so each
  // unit's reduction overlaps the backward of the unit before it.
  void reduce_scatter_waits(int micro) {
    for (const std::vector<int>& starts : in_flight_) {
      const int unit = s_.ops[static_cast<std::size_t>(starts.front())].unit;
      const auto u = static_cast<std::size_t>(unit);
      ScheduleOp last = make(OpKind::kReduceScatterWait, micro, unit);
      last.free.push_back({BufferKind::kUnitGrad, unit, numel(unit) * sizeof(float)});
      // Accumulation into the shard in a fixed order.
      const int id = add_bucket_waits(OpKind::kReduceScatterWait, micro, unit, starts, {grad_writer_[u]}, std::move(last));
      grad_writer_[u] = id;
      grad_free_[u] = id;
      grad_open_[u] = false;
      replica_start(micro, unit);  // the shard holds the step's whole gradient of the unit now
    }
    in_flight_.clear();
  }

  // ---- the replica reduction, overlapped with the last micro-batch's backward --------------------

  CollectiveSpec replica_reduce_scatter_spec(int u) const {
    if (plan_.optimizer <= plan_.grads) return {};
    return with_quant({CollectiveKind::kReduceScatter, plan_.grads + 1, plan_.optimizer, shards_.unit(u).grads.len,
                       in_.grad_dtype},
                      plan_.grad_quant());
  }
  CollectiveSpec replica_all_reduce_spec(int u) const {
    if (plan_.optimizer >= top_) return {};
    return with_quant({CollectiveKind::kAllReduce, plan_.optimizer + 1, top_, shards_.unit(u).optimizer.len,
                       in_.grad_dtype},
                      plan_.grad_quant());
  }

  // A replica reduction's starts (every bucket), boundary traffic wherever they are issued.
  std::vector<int> replica_starts(OpKind kind, int micro, int unit, const CollectiveSpec& spec) {
    const auto u = static_cast<std::size_t>(unit);
    ScheduleOp op = make(kind, micro, unit);
    op.phase = TrafficPhase::kStepBoundary;
    op.deps = {grad_writer_[u]};
    const std::vector<int> ids = add_bucket_starts(std::move(op), spec);
    grad_writer_[u] = ids.back();
    return ids;
  }
  void replica_waits(OpKind kind, int unit, const std::vector<int>& starts) {
    const auto u = static_cast<std::size_t>(unit);
    ScheduleOp last = make(kind, -1, unit);
    grad_writer_[u] = add_bucket_waits(kind, -1, unit, starts, {grad_writer_[u]}, std::move(last));
  }

  // With the boundary overlap, in the step's last micro-batch: the unit's replica reduction starts
  // as soon as its gradient shard is final (its wait is at the boundary, before the norm). When
  // the plan needs both a reduce-scatter and an all-reduce, the second waits for the boundary.
  void replica_start(int micro, int unit) {
    if (!overlap_ || micro != in_.grad_accum - 1) return;
    const auto u = static_cast<std::size_t>(unit);
    const CollectiveSpec rs = replica_reduce_scatter_spec(unit), ar = replica_all_reduce_spec(unit);
    if (rs.kind != CollectiveKind::kNone) {
      replica_pending_[u] = replica_starts(OpKind::kReplicaReduceScatterStart, micro, unit, rs);
    } else if (ar.kind != CollectiveKind::kNone) {
      replica_pending_[u] = replica_starts(OpKind::kReplicaAllReduceStart, micro, unit, ar);
    }
  }

  CollectiveSpec updated_spec(int u) const {
    // Empty (no levels) when the optimizer slice already covers the primary shard; the spec still
    // says what lands there. Never quantized: it writes the primary shard itself, and quantizing
    // it would make the rounding permanent.
    return flat_if_planned({CollectiveKind::kAllGather, plan_.weights + 1, plan_.optimizer,
                            shards_.unit(u).weights.len, in_.weight_dtype});
  }

  void head_backward(int micro, const Stage& head) {
    const int bwd = compute(OpKind::kBackward, micro, ComputeStage::kHead, -1, head.units, head.units, {});
    for (int u : head.units) release(micro, u, {bwd});
    // The embedding's gradient is complete only after the lookup's backward, at the very end.
    reduce_scatter_start(micro, head.units.front(), bwd);
    if (!s_.grads_partitioned) replica_start(micro, head.units.front());
  }

  void backward_pass(int micro) {
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
      const int bwd = compute(OpKind::kBackward, micro, ComputeStage::kBlock, l, {u}, {u}, {wait});
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

  // ---- the step boundary --------------------------------------------------------------------

  void boundary() {
    begin_segment(SegmentKind::kBoundaryReduce, -1, fmt::format("step {} boundary reduction", step_));
    for (int u = 0; u < s_.unit_count; ++u) {
      const auto uu = static_cast<std::size_t>(u);
      const CollectiveSpec rs = replica_reduce_scatter_spec(u), ar = replica_all_reduce_spec(u);
      // Starts posted in the last micro-batch are waited for here; the rest start and wait here.
      std::vector<int> pending = std::move(replica_pending_[uu]);
      replica_pending_[uu].clear();
      const OpKind pending_kind = pending.empty() ? OpKind::kForward : s_.ops[static_cast<std::size_t>(pending[0])].kind;
      if (rs.kind != CollectiveKind::kNone) {
        if (pending_kind != OpKind::kReplicaReduceScatterStart) {
          pending = replica_starts(OpKind::kReplicaReduceScatterStart, -1, u, rs);
        }
        replica_waits(OpKind::kReplicaReduceScatterWait, u, pending);
        pending.clear();
      }
      if (ar.kind != CollectiveKind::kNone) {
        if (pending_kind != OpKind::kReplicaAllReduceStart || pending.empty()) {
          pending = replica_starts(OpKind::kReplicaAllReduceStart, -1, u, ar);
        }
        replica_waits(OpKind::kReplicaAllReduceWait, u, pending);
      }
    }
    ScheduleOp norm = make(OpKind::kGradNorm, -1, -1);
    norm.comm = {CollectiveKind::kControlSum, 0, plan_.optimizer, 1, DType::kF64};
    norm.deps = grad_writer_;
    const int norm_id = add(norm);

    begin_segment(SegmentKind::kBoundaryUpdate, -1, fmt::format("step {} update", step_));
    // The ranks agree whether any was asked to stop after this step: one scalar over the world,
    // a scheduled control op like the loss, so the meter counts it and the simulator prices it.
    // First in the update, so that no updated-weights gather in flight has to finish before it.
    ScheduleOp agree = make(OpKind::kAgreeStop, -1, -1);
    agree.comm = {CollectiveKind::kControlMax, 0, top_, 1, DType::kF64};
    agree.deps = {norm_id, last_agree_};  // the flag of the step before
    last_agree_ = add(agree);
    std::vector<int> updating;
    for (int u = 0; u < s_.unit_count; ++u) {
      const auto uu = static_cast<std::size_t>(u);
      ScheduleOp step = make(OpKind::kOptimizerStep, -1, u);
      step.deps = {norm_id};
      const int step_id = add(step);
      ScheduleOp ag = make(OpKind::kGatherUpdatedStart, -1, u);
      // Overwrites the primary shard: every gather that reads it must have finished.
      ag.deps = {step_id, last_compute_};
      ag.carried = overlap_ && step_ + 1 == in_.steps;
      const std::vector<int> starts = add_bucket_starts(std::move(ag), updated_spec(u));
      if (overlap_) {
        update_pending_[uu] = starts;  // waited for by the next step's first gather of the unit
        updating.insert(updating.end(), starts.begin(), starts.end());
      } else {
        updated_[uu] = add_bucket_waits(OpKind::kGatherUpdatedWait, -1, u, starts, {},
                                        make(OpKind::kGatherUpdatedWait, -1, u));
        updating.push_back(updated_[uu]);
      }
      grad_writer_[uu] = step_id;  // the next step starts from zeroed gradients after the update
    }
    ScheduleOp bump = make(OpKind::kInvalidateSecondaries, -1, -1);
    bump.deps = updating;
    add(bump);
  }

  // A wait's spec: the collective it completes, with nothing moved by the wait itself.
  static CollectiveSpec no_bytes(CollectiveSpec c) {
    c.kind = CollectiveKind::kNone;
    return c;
  }

  const ScheduleInputs& in_;
  const ShardPlan& plan_;
  int top_;
  ShardLayout shards_;  // rank 0's: the builder needs only the lengths, the same on every rank
  int step_ = 0;
  StepSchedule s_;
  int last_compute_ = -1;
  int last_loss_reduce_ = -1;
  int last_agree_ = -1;
  std::vector<int> released_;       // per unit: the release of its last gathered copy
  std::vector<int> grad_free_;      // per unit: the wait that freed its last unit-gradient buffer
  std::vector<int> grad_writer_;    // per unit: the last op that wrote its gradient shard
  std::vector<int> updated_;        // per unit: the last update of its primary shard
  std::vector<int> kept_;           // per unit: the last keep_secondary
  std::vector<int> secondary_read_; // per unit: the last gather wait that read the secondary copy
  std::vector<std::uint64_t> gathered_live_;  // per unit: bytes its live gathered copy holds (0: none)
  std::vector<bool> issued_;        // per unit: a gather started and not yet released
  std::uint64_t live_gathered_ = 0; // gathered bytes live at this point of the list
  int last_gather_start_ = -1;
  int last_release_ = -1;
  std::vector<bool> grad_open_;     // per unit: a unit-gradient buffer of this micro-batch is live
  std::vector<std::vector<int>> in_flight_;  // reduce-scatter starts (each unit's buckets) not yet waited for
  std::vector<std::vector<int>> gather_starts_;  // per unit: the bucket starts of its gather in flight
  bool overlap_ = false;            // the boundary overlapped (training lists only)
  std::vector<std::vector<int>> update_pending_;   // per unit: the updated-weights gather's starts to wait for
  std::vector<bool> update_carried_in_;            // per unit: its wait is for the previous run of the list
  std::vector<std::vector<int>> replica_pending_;  // per unit: a replica reduction started in the last micro-batch
};

}  // namespace

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
  if (op.buckets > 1) what += fmt::format(", bucket {} of {}", op.bucket + 1, op.buckets);
  const std::string when = op.micro >= 0 ? fmt::format("step {} micro-batch {}", op.step, op.micro)
                                         : fmt::format("step {} boundary", op.step);
  return fmt::format("op {} ({}, {})", index, what, when);
}

ScheduleInputs schedule_inputs(const ModelLayout& layout, const Topology& topology, const StepOptions& step,
                               int micro_batch, int seq_len, ScheduleMode mode) {
  ScheduleInputs in;
  static_cast<StepOptions&>(in) = step;
  in.layout = &layout;
  in.topology = &topology;
  in.mode = mode;
  in.tokens_per_micro = static_cast<std::size_t>(micro_batch) * static_cast<std::size_t>(seq_len);
  in.seq_len = seq_len;
  return in;
}

StepSchedule build_step_schedule(const ScheduleInputs& in) {
  STRATA_REQUIRE(in.layout != nullptr && in.topology != nullptr, "schedule inputs need a layout and a topology");
  STRATA_REQUIRE(in.grad_accum >= 1 && in.steps >= 1, "a schedule needs at least one micro-batch and one step");
  in.plan.validate(*in.topology);
  return Builder(in).build();
}

}  // namespace strata
