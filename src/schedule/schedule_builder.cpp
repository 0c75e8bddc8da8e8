// The builder's shared part: setup, the list's bookkeeping, collectives split into buckets, and
// the gathers, releases and compute ops that every pass writes through.
#include "schedule/schedule_builder.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "plan/unit_padding.hpp"

namespace strata {

ScheduleBuilder::ScheduleBuilder(const ScheduleInputs& in)
    : in_(in), plan_(in.plan), top_(in.topology->level_count() - 1), shards_(*in.layout, *in.topology, in.plan, 0) {
  const ModelLayout& lay = *in_.layout;
  s_.padded_numel = padded_unit_sizes(lay, *in_.topology);
  s_.unit_count = static_cast<int>(lay.unit_count());
  for (const auto& u : lay.units()) s_.unit_names.push_back(u.name);
  s_.grads_partitioned = plan_.grads != kReplicated;
  s_.activation_checkpointing = in_.activation_checkpointing;
  overlap_ = in_.boundary_overlap && in_.mode == ScheduleMode::kTrain;
  units_.assign(static_cast<std::size_t>(s_.unit_count), UnitTimeline{});
  // The list is run once per step: its first step waits for the updates the previous run of it
  // started (none before the first step: the wait then finds nothing to wait for).
  for (UnitTimeline& t : units_) t.update_carried_in = overlap_;
  check_live_bound();
}

// The bound must let the largest stage be gathered alone (the head holds two units at once).
void ScheduleBuilder::check_live_bound() const {
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
             st.stage == ComputeStage::kHead ? "the head (final norm and token table)"
                                             : s_.unit_names[static_cast<std::size_t>(st.units[0])]);
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

StepSchedule ScheduleBuilder::build() {
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

// ---- bookkeeping ------------------------------------------------------------------------------

void ScheduleBuilder::begin_segment(SegmentKind kind, int micro, std::string name) {
  end_segment();
  const int at = static_cast<int>(s_.ops.size());
  s_.segments.push_back({kind, step_, micro, at, at, std::move(name)});
}
void ScheduleBuilder::end_segment() {
  if (!s_.segments.empty()) s_.segments.back().end = static_cast<int>(s_.ops.size());
}

ScheduleOp ScheduleBuilder::make(OpKind kind, int micro, int unit) const {
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

// Appends the op (its dependencies sorted, unique, none missing) and keeps the units' buffers.
int ScheduleBuilder::add(ScheduleOp op) {
  std::sort(op.deps.begin(), op.deps.end());
  op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
  op.deps.erase(std::remove(op.deps.begin(), op.deps.end(), -1), op.deps.end());
  for (const BufferEffect& b : op.alloc) {
    STRATA_CHECK(unit(b.unit).allocate(b), "the builder allocates the {} buffer of unit {} twice",
                 buffer_kind_name(b.kind), b.unit);
  }
  for (const BufferEffect& b : op.free) {
    STRATA_CHECK(unit(b.unit).free(b.kind).has_value(), "the builder frees the {} buffer of unit {}, not allocated",
                 buffer_kind_name(b.kind), b.unit);
  }
  s_.ops.push_back(std::move(op));
  return static_cast<int>(s_.ops.size()) - 1;
}

bool ScheduleBuilder::is_block(int unit) const {
  return in_.layout->unit(static_cast<std::size_t>(unit)).kind == UnitKind::kBlock;
}

void ScheduleBuilder::resident_state() {
  const std::uint64_t weights = weight_bytes(shards_.weight_elements());
  const std::uint64_t grads = shards_.grad_elements() * sizeof(float);
  const std::uint64_t optim = shards_.optimizer_elements() * 3 * sizeof(float);  // fp32 master, Adam m and v
  auto state = [&](const char* name, int level, std::uint64_t bytes) {
    return ResidentState{name, level, in_.topology->span(level), bytes};
  };
  s_.resident = {state("weights", plan_.weights, weights), state("grads", plan_.grads, grads),
                 state("optimizer", plan_.optimizer, optim)};
}

// Model FLOPs of a compute stage on this rank's micro-batch: 2 per matrix parameter per token (the
// tied token table counts at the head), plus 4 T C per token for attention in a block; backward is
// twice the forward.
double ScheduleBuilder::stage_flops(ComputeStage stage, int unit, double factor) const {
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

// ---- collectives and their buckets ----------------------------------------------------------------

// The plan's format where the collective has peers: over levels spanning one rank nothing moves, and
// quantizing there would only round the data. A quantized gradient reduction quantizes the fp32
// accumulation itself, so its spec says fp32 whatever the wire dtype of plain ones. And flat when
// the plan says so, except for qgZ reductions, which are two-hop by definition.
CollectiveSpec ScheduleBuilder::with_quant(CollectiveSpec c, QuantFormat f) const {
  c = flat_if_planned(c);
  if (!f.enabled() || c.last_level < c.first_level || in_.topology->span(c.first_level, c.last_level) == 1) return c;
  c.quant = f;
  if (c.kind != CollectiveKind::kAllGather) {
    c.dtype = DType::kF32;
    c.flat = false;
  }
  return c;
}
CollectiveSpec ScheduleBuilder::flat_if_planned(CollectiveSpec c) const {
  c.flat = plan_.collectives == CollectiveAlgorithm::kFlat && !c.is_control() && c.kind != CollectiveKind::kNone;
  return c;
}

// The collective as the plan's buckets, one spec per call of at most the plan's bucket size for its
// kind (gathers, or reductions): a part of every rank's piece (gather, reduce-scatter) or of the
// buffer (all-reduce), a multiple of the quantization block, so the blocks are those of the whole
// collective.
std::vector<CollectiveSpec> ScheduleBuilder::buckets_of(const CollectiveSpec& c) const {
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

// A start for each bucket of `spec`, in order (each after the one before), from `first` (the op of
// bucket 0, its other fields set). Returns the ops' ids.
std::vector<int> ScheduleBuilder::add_bucket_starts(ScheduleOp first, const CollectiveSpec& spec) {
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

// A wait for each of `starts` (a bucketed start's ops), each after its start and the wait before;
// `last` (effects such as frees) goes on the final one. Returns the final wait's id.
int ScheduleBuilder::add_bucket_waits(OpKind kind, int micro, int unit, const std::vector<int>& starts,
                                      std::vector<int> deps, ScheduleOp last) {
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
    // After every bucket started: the buckets share one buffer, which the starts write in flight
    // and the waits make whole, in order.
    op.deps.push_back(b == 0 ? starts.back() : prev);
    prev = add(op);
  }
  return prev;
}

// A wait's spec: the collective it completes, with nothing moved by the wait itself.
CollectiveSpec ScheduleBuilder::no_bytes(CollectiveSpec c) {
  c.kind = CollectiveKind::kNone;
  return c;
}

// ---- gathers and compute ----------------------------------------------------------------------

// The fp32 compute copy, plus the staging area the gather lands in: the blobs of a quantized
// gather, or the narrow copy of an unquantized bf16 one. Nothing for fp32 weights held whole
// (compute reads the primary in place).
std::uint64_t ScheduleBuilder::gathered_bytes(int unit, const CollectiveSpec& gather) const {
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

CollectiveSpec ScheduleBuilder::gather_spec(int unit, WeightSource source, bool backward) const {
  if (plan_.weights == kReplicated) return {};
  const int last = source == WeightSource::kSecondary ? plan_.secondary : plan_.weights;
  return with_quant({CollectiveKind::kAllGather, 0, last, numel(unit), in_.weight_dtype}, plan_.weight_quant(backward));
}

int ScheduleBuilder::gather_start(int micro, int u, WeightSource source, bool backward) {
  if (source == WeightSource::kPrimary) await_update(micro, u);
  UnitTimeline& t = unit(u);
  ScheduleOp op = make(OpKind::kGatherStart, micro, u);
  op.source = source;
  op.comm = gather_spec(u, source, backward);
  const std::uint64_t bytes = gathered_bytes(u, op.comm);
  if (bytes > 0) op.alloc.push_back({BufferKind::kGathered, u, bytes});
  live_gathered_ += bytes;
  t.gather_issued = true;
  // One gathered buffer per unit: the previous copy must be gone. Starts run in list order and
  // releases too (below), so the live bytes of any valid order are at most the list order's.
  op.deps = {t.released, last_gather_start_, last_release_};
  if (source == WeightSource::kSecondary) {
    STRATA_CHECK(t.kept >= 0, "a gather from the secondary copy of unit {} before it was kept", u);
    op.deps.push_back(t.kept);
  } else {
    op.deps.push_back(t.updated);  // the previous step's update wrote the primary
  }
  const CollectiveSpec spec = op.comm;
  const std::vector<int> ids = add_bucket_starts(std::move(op), spec);
  t.pending(OpKind::kGatherStart) = ids;
  last_gather_start_ = ids.back();
  return ids.front();
}

int ScheduleBuilder::gather_wait(int micro, int u, int start) {
  UnitTimeline& t = unit(u);
  const std::vector<int> starts = t.take_pending(OpKind::kGatherStart);
  STRATA_CHECK(!starts.empty() && starts.front() == start, "a gather wait of unit {} for another start", u);
  const bool from_secondary = s_.ops[static_cast<std::size_t>(start)].source == WeightSource::kSecondary;
  ScheduleOp last = make(OpKind::kGatherWait, micro, u);
  // The secondary shard is in the gathered unit now; it has served its purpose.
  if (from_secondary) last.free.push_back({BufferKind::kSecondary, u, secondary_bytes(u)});
  const int id = add_bucket_waits(OpKind::kGatherWait, micro, u, starts, {}, std::move(last));
  if (from_secondary) t.secondary_read = id;
  return id;
}

int ScheduleBuilder::release(int micro, int u, std::vector<int> deps) {
  UnitTimeline& t = unit(u);
  ScheduleOp op = make(OpKind::kRelease, micro, u);
  op.deps = std::move(deps);
  op.deps.push_back(last_release_);
  const std::uint64_t bytes = t.live(BufferKind::kGathered);
  if (bytes > 0) op.free.push_back({BufferKind::kGathered, u, bytes});
  live_gathered_ -= bytes;
  t.gather_issued = false;
  const int id = add(op);
  t.released = id;
  last_release_ = id;
  return id;
}

int ScheduleBuilder::compute(OpKind kind, int micro, ComputeStage stage, int layer, std::vector<int> weight_units,
                             std::vector<int> grad_units, std::vector<int> deps) {
  ScheduleOp op = make(kind, micro, weight_units.empty() ? grad_units.front() : weight_units.front());
  op.stage = stage;
  op.layer = layer;
  op.flops = stage_flops(stage, op.unit, kind == OpKind::kBackward ? 2.0 : 1.0);
  if (kind == OpKind::kRecompute) {
    // The recompute stops before the MLP's output product: the backward reads only its input.
    const double c = in_.layout->config().n_embd;
    op.flops -= 2.0 * 4.0 * c * c * static_cast<double>(in_.tokens_per_micro);
  }
  op.deps = std::move(deps);
  op.deps.push_back(last_compute_);  // one compute stream and one activation store
  if (kind == OpKind::kForward && stage == ComputeStage::kHead) op.deps.push_back(last_loss_reduce_);  // one loss slot
  for (int u : grad_units) {
    UnitTimeline& t = unit(u);
    if (s_.grads_partitioned) {
      if (!t.grad_open) {  // the first writer of this micro-batch's unit gradient
        op.alloc.push_back({BufferKind::kUnitGrad, u, numel(u) * sizeof(float)});
        op.deps.push_back(t.grad_freed);
        t.grad_open = true;
      }
    } else {
      op.deps.push_back(t.grad_written);
      t.grad_written = static_cast<int>(s_.ops.size());
    }
  }
  op.weight_units = std::move(weight_units);
  op.grad_units = std::move(grad_units);
  last_compute_ = add(op);
  return last_compute_;
}

// ---- gather issue with a prefetch depth and a live-memory bound ----------------------------------
//
// Stage i is started at the latest before its compute needs it; with prefetch depth d, stages up to
// i + d are started before stage i computes, as long as the gathered-but-not-released bytes stay
// within the bound and no unit of the stage is still gathered from an earlier stage (one gathered
// copy per unit).

std::uint64_t ScheduleBuilder::stage_bytes(const std::vector<int>& units, WeightSource source, bool backward) const {
  std::uint64_t b = 0;
  for (int u : units) b += gathered_bytes(u, gather_spec(u, source, backward));
  return b;
}

bool ScheduleBuilder::can_issue(const Issuer& is, std::size_t stage) const {
  for (int u : is.units[stage]) {
    if (units_[static_cast<std::size_t>(u)].gather_issued) return false;
  }
  return in_.max_live_bytes == 0 ||
         live_gathered_ + stage_bytes(is.units[stage], is.source, is.backward) <= in_.max_live_bytes;
}

void ScheduleBuilder::issue_stage(int micro, Issuer& is) {
  const std::size_t stage = is.next++;
  for (int u : is.units[stage]) is.starts[stage].push_back(gather_start(micro, u, is.source, is.backward));
}

// Before stage `i` computes: stage i must be issued (the bound was checked to allow one stage
// alone), then up to i + depth as far as the bound allows.
void ScheduleBuilder::issue_through(int micro, Issuer& is, std::size_t i, bool prefetch) {
  while (is.next <= i) {
    STRATA_CHECK(can_issue(is, is.next), "stage {} cannot be gathered within the live-memory bound", is.next);
    issue_stage(micro, is);
  }
  if (!prefetch) return;
  const std::size_t last = std::min(is.units.size() - 1, i + static_cast<std::size_t>(in_.prefetch));
  while (is.next <= last && can_issue(is, is.next)) issue_stage(micro, is);
}

}  // namespace strata
