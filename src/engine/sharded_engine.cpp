// The sharding engine: the op dispatch of the step schedule and the TrainingEngine interface.
#include "engine/sharded_engine.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "comm/hierarchical.hpp"
#include "comm/quantized.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/op_profile.hpp"
#include "engine/plan_report.hpp"
#include "engine/unit_collectives.hpp"
#include "optim/adamw.hpp"
#include "optim/grad_norm.hpp"
#include "sim/chrome_trace.hpp"
#include "schedule/validate.hpp"

namespace strata {

ShardedEngine::ShardedEngine(const GptConfig& config, int batch, int seq_len, std::uint64_t seed, Communicator& comm,
                             ShardedEngineOptions options)
    : comm_(comm), options_(std::move(options)), gpt_(config, batch, seq_len) {
  STRATA_REQUIRE(options_.weight_dtype == DType::kF32 || options_.weight_dtype == DType::kBF16,
                 "working weights must be fp32 or bf16");
  STRATA_REQUIRE(options_.grad_dtype == DType::kF32 || options_.grad_dtype == DType::kBF16,
                 "communicated gradients must be fp32 or bf16");
  STRATA_REQUIRE(options_.grad_accum >= 1, "gradient accumulation needs at least one micro-batch");
  const Topology& t = comm_.topology();
  options_.plan.validate(t);

  schedule_ = build_step_schedule(schedule_inputs(layout(), t, options_, batch, seq_len));
  eval_schedule_ = build_step_schedule(schedule_inputs(layout(), t, options_, batch, seq_len, ScheduleMode::kEvaluate));
  if (options_.validate) {
    require_valid_schedule(schedule_, "training step");
    require_valid_schedule(eval_schedule_, "evaluation");
  }
  counts_ = count_schedule(schedule_, t);
  reduce_segment_ = options_.grad_accum;
  update_segment_ = options_.grad_accum + 1;
  STRATA_CHECK(schedule_.segments.size() == static_cast<std::size_t>(update_segment_ + 1) &&
                   schedule_.segments[static_cast<std::size_t>(reduce_segment_)].kind == SegmentKind::kBoundaryReduce &&
                   schedule_.segments[static_cast<std::size_t>(update_segment_)].kind == SegmentKind::kBoundaryUpdate,
               "a one-step schedule is its micro-batches, the boundary reduction and the update");

  STRATA_REQUIRE(options_.prefetch >= 0 && options_.prefetch <= 64, "prefetch must be between 0 and 64 stages (got {})",
                 options_.prefetch);
  STRATA_REQUIRE(options_.inject_delay_us >= 0, "the injected delay must not be negative");
  // auto on an MPI library without MPI_THREAD_SERIALIZED: inline, the only choice there.
  if (options_.tune_overlap && !comm_.allows_comm_thread()) options_.overlap = false;
  STRATA_REQUIRE(!options_.overlap || comm_.allows_comm_thread(),
                 "overlap needs an MPI library that gives MPI_THREAD_SERIALIZED (the communication thread makes the "
                 "MPI calls); this one does not: run with --overlap 0");
  CommThread::Options threading;
  threading.threaded = options_.overlap;
  threading.record_spans = options_.record_timeline;
  threading.max_delay_us = options_.inject_delay_us;
  threading.seed = static_cast<std::uint64_t>(comm_.rank()) + 1;
  comm_thread_ = std::make_unique<CommThread>(threading);
  step_end_ns_ = steady_now_ns();
  units_ = make_unit_shards(layout(), t, options_.plan, comm_.rank(), options_.weight_dtype, seed);
}

ShardedEngine::~ShardedEngine() = default;

MeasuredMemory ShardedEngine::measured_memory() const {
  MeasuredMemory m;
  for (const auto& u : units_) {
    m.weights += u->primary.size();
    m.grads += u->grad_shard.size() * sizeof(float);
    m.optimizer += (u->master.size() + u->m.size() + u->v.size()) * sizeof(float);
  }
  m.scheduled_peak = scheduled_.peak_bytes();
  m.scheduled_peak_by_kind = peak_by_kind_;
  m.scratch_peak = scratch_.peak_bytes();
  return m;
}

std::string ShardedEngine::overlap_mode() const {
  if (!options_.overlap_auto_reason.empty()) return "auto: " + options_.overlap_auto_reason;
  if (!options_.overlap) return "off";
  const std::string now = comm_thread_->threaded() ? "communication thread" : "inline";
  if (!options_.tune_overlap) return "on (" + now + ")";
  if (tuner_.deciding()) return "auto (measuring the communication thread against inline; now " + now + ")";
  return "auto: " + tuner_.verdict();
}

OverlapStats ShardedEngine::overlap_stats() const {
  return {comm_thread_->busy_seconds(), comm_thread_->exposed_seconds(), comm_thread_->tasks_run()};
}

nlohmann::json ShardedEngine::timeline() const {
  STRATA_REQUIRE(options_.record_timeline, "the timeline was not recorded (record_timeline is off)");
  std::vector<TraceSpan> spans;
  auto add = [&](const TaskSpan& span, int lane) {
    spans.push_back({span.name, lane, static_cast<double>(span.begin_ns) * 1e-3, static_cast<double>(span.end_ns) * 1e-3});
  };
  for (const TaskSpan& span : compute_spans_) add(span, 0);
  for (const TaskSpan& span : comm_thread_->spans()) add(span, 1);
  const int pid = comm_.rank();
  return chrome_trace(chrome_trace_events(
      pid, fmt::format("rank {}", pid),
      {"compute (schedule ops)", options_.overlap ? "communication thread (or inline)" : "communication (inline)"}, spans));
}

std::span<const unsigned char> ShardedEngine::secondary_copy(int unit) const {
  const UnitShard& u = *units_.at(static_cast<std::size_t>(unit));
  const std::string& name = layout().unit(static_cast<std::size_t>(unit)).name;
  STRATA_REQUIRE(u.secondary_len != 0, "unit '{}' has no secondary copy under plan {}", name, options_.plan.name);
  STRATA_REQUIRE(u.secondary_state != SecondaryResidency::kNone,
                 "the secondary copy of unit '{}' is not held: it is made in forward and dropped once backward has "
                 "gathered from it",
                 name);
  STRATA_REQUIRE(u.secondary_state != SecondaryResidency::kStale,
                 "the secondary copy of unit '{}' is stale: made before the weights last changed (an update or a "
                 "checkpoint load)",
                 name);
  return {u.secondary->data(), u.secondary->size()};
}

std::string ShardedEngine::description() const {
  const Topology& t = comm_.topology();
  const std::string bound =
      options_.max_live_bytes == 0 ? "" : fmt::format(" (at most {} gathered bytes)", options_.max_live_bytes);
  return fmt::format("sharded | topology {} | plan {}: {} | {} | prefetch {}{} | overlap {} | boundary overlap {}",
                     t.to_string(), options_.plan.name, options_.plan.describe(t), dtype_name(options_.weight_dtype),
                     options_.prefetch, bound, overlap_mode(),
                     options_.boundary_overlap ? "on" : "off");
}

std::string ShardedEngine::timeline_json() const { return timeline().dump(); }

nlohmann::json ShardedEngine::traffic_totals() {
  flush();
  return job_traffic_totals(comm_);
}

PlanReportInputs ShardedEngine::report_inputs() const {
  PlanReportInputs in;
  in.topology = &comm_.topology();
  in.step = &options_;
  in.schedule = &schedule_;
  in.counts = &counts_;
  in.memory = measured_memory();
  in.meter = &comm_.meter();
  in.steps_run = steps_run_;
  return in;
}

std::string ShardedEngine::report() {
  flush();
  std::string out = format_plan_report(plan_report(report_inputs()));
  const OverlapStats o = overlap_stats();
  if (o.collectives > 0) {
    out += fmt::format(
        "communication (this rank): {:.3f} s in {} collectives, of which compute waited {:.3f} s: {:.0f}% hidden "
        "(overlap {})\n",
        o.communication_s, o.collectives, o.exposed_s, 100.0 * o.hidden_fraction(), overlap_mode());
  }
  return out;
}

// ---- buffers the schedule allocates ---------------------------------------------------------

void ShardedEngine::acquire_buffer(const BufferEffect& b) {
  UnitShard& u = shard(b.unit);
  const std::uint64_t fp32 = u.padded * sizeof(float);
  switch (b.kind) {
    case BufferKind::kGathered: {
      STRATA_CHECK(u.weights == WeightResidency::kSharded && !u.compute, "unit {} is gathered twice", b.unit);
      STRATA_CHECK(b.bytes >= fp32, "the schedule allocates {} bytes for gathering unit {}, less than its {} fp32 bytes",
                   b.bytes, b.unit, fp32);
      u.compute = scheduled_.acquire(fp32, false);
      // The staging area (blobs, or a bf16 copy) is checked against the gather that uses it.
      if (b.bytes > fp32) u.staging = scheduled_.acquire(b.bytes - fp32, false);
      break;
    }
    case BufferKind::kSecondary:
      STRATA_CHECK(u.secondary_state == SecondaryResidency::kNone && b.bytes == u.secondary_len * dtype_size(options_.weight_dtype),
                   "the secondary copy of unit {}: {} bytes allocated, {} elements held", b.unit, b.bytes, u.secondary_len);
      u.secondary = scheduled_.acquire(b.bytes, false);
      break;
    case BufferKind::kUnitGrad:
      STRATA_CHECK(u.unit_grad == GradResidency::kNone && b.bytes == fp32, "the unit gradient of unit {}: {} bytes for {} elements",
                   b.unit, b.bytes, u.padded);
      u.grad = scheduled_.acquire(b.bytes, true);
      u.unit_grad = GradResidency::kOpen;
      break;
    case BufferKind::kCount: break;
  }
  auto& live = live_by_kind_[static_cast<std::size_t>(b.kind)];
  live += b.bytes;
  peak_by_kind_[static_cast<std::size_t>(b.kind)] = std::max(peak_by_kind_[static_cast<std::size_t>(b.kind)], live);
}

void ShardedEngine::release_buffer(const BufferEffect& b) {
  UnitShard& u = shard(b.unit);
  switch (b.kind) {
    case BufferKind::kGathered:
      STRATA_CHECK(u.weights != WeightResidency::kGathering, "unit {} is released while its gather is in flight", b.unit);
      scheduled_.release(std::move(u.compute));
      scheduled_.release(std::move(u.staging));
      u.working_bf16 = nullptr;
      u.weights = WeightResidency::kSharded;
      break;
    case BufferKind::kSecondary:
      scheduled_.release(std::move(u.secondary));
      u.secondary_state = SecondaryResidency::kNone;
      break;
    case BufferKind::kUnitGrad:
      STRATA_CHECK(u.unit_grad != GradResidency::kReducing, "the gradient of unit {} is freed while its reduction is in flight",
                   b.unit);
      scheduled_.release(std::move(u.grad));
      u.unit_grad = GradResidency::kNone;
      break;
    case BufferKind::kCount: break;
  }
  live_by_kind_[static_cast<std::size_t>(b.kind)] -= b.bytes;
}

void ShardedEngine::weights_changed() {
  for (auto& u : units_) {
    if (u->secondary_state == SecondaryResidency::kHeld) u->secondary_state = SecondaryResidency::kStale;
  }
}

// ---- the table's accesses against the residency -------------------------------------------

void ShardedEngine::check_accesses(const ScheduleOp& op) {
  for (const Access& a : op_accesses(schedule_, op)) {
    if (a.unit < 0) continue;
    const UnitShard& u = shard(a.unit);
    const std::string what = resource_name(schedule_, a.resource, a.unit);
    switch (a.resource) {
      case Resource::kGathered:
        // A gather's start writes the copy it allocated; everything else needs it complete.
        if (a.after == After::kInFlight) {
          const WeightResidency expected = op.bucket == 0 ? WeightResidency::kSharded : WeightResidency::kGathering;
          STRATA_CHECK(u.weights == expected, "{} would gather {}, which is {}", op_kind_name(op.kind), what,
                       residency_name(u.weights));
        } else if (a.read) {
          STRATA_CHECK(u.weights == WeightResidency::kGathered, "{} reads {}, which is {} (the schedule computes with "
                       "a unit before its gather completed)", op_kind_name(op.kind), what, residency_name(u.weights));
        }
        break;
      case Resource::kSecondary:
        if (a.read) (void)secondary_copy(a.unit);  // refuses a missing or stale copy with a sentence
        break;
      case Resource::kPrimary:
        // A read of the primary shard while its update is in flight would see half the new weights.
        STRATA_CHECK(!a.read || u.primary_state == PrimaryResidency::kCurrent, "{} reads {}, which is {}",
                     op_kind_name(op.kind), what, residency_name(u.primary_state));
        break;
      case Resource::kUnitGrad:
        STRATA_CHECK(u.unit_grad != GradResidency::kNone, "{} touches {}, which is not allocated", op_kind_name(op.kind),
                     what);
        break;
      default: break;
    }
  }
}

// ---- the ops --------------------------------------------------------------------------------

std::function<void()> ShardedEngine::gather_task(const ScheduleOp& op) {
  UnitShard& u = shard(op.unit);
  const DType wt = options_.weight_dtype;
  if (op.comm.bucketed()) {
    // A bucket gathers its part of every rank's piece through collective scratch, into its parts
    // of the compute copy; the unit's weights are complete when its last bucket is waited for.
    const bool secondary = op.source == WeightSource::kSecondary;
    const void* from = secondary ? secondary_copy(op.unit).data() : u.primary.data();
    float* compute = reinterpret_cast<float*>(u.compute->data());
    const CollectiveSpec spec = op.comm;
    const TrafficPhase phase = op.phase;
    return [this, spec, phase, from, wt, compute] {
      comm_.meter().set_phase(phase);
      gather_bucket(comm_, spec, from, wt, compute, scratch_);
    };
  }
  STRATA_CHECK(op.comm.dtype == wt && op.comm.elements == u.padded, "a gather of unit {} as {} elements of {}", op.unit,
               op.comm.elements, dtype_name(op.comm.dtype));
  const bool secondary = op.source == WeightSource::kSecondary;
  const void* from = secondary ? secondary_copy(op.unit).data() : u.primary.data();  // refuses a stale or missing copy
  const std::size_t from_len = secondary ? u.secondary_len : u.weight_len;
  float* compute = reinterpret_cast<float*>(u.compute->data());
  const std::size_t staging = u.staging ? u.staging->size() : 0;
  void* stage = u.staging ? static_cast<void*>(u.staging->data()) : static_cast<void*>(compute);
  const CollectiveSpec spec = op.comm;
  const TrafficPhase phase = op.phase;
  const std::size_t padded = u.padded;
  if (spec.quant.enabled()) {
    const auto span = static_cast<std::size_t>(comm_.topology().span(spec.first_level, spec.last_level));
    STRATA_CHECK(staging == quantized_gather_bytes(spec.quant, from_len, span),
                 "the schedule stages {} bytes for the quantized gather of unit {}, which needs {}", staging, op.unit,
                 quantized_gather_bytes(spec.quant, from_len, span));
    // Decoded into fp32; bf16 working weights compute with bf16 values, as unquantized ones do,
    // so the secondary copy taken from them is exact.
    return [this, spec, phase, from, wt, from_len, stage, compute, padded] {
      comm_.meter().set_phase(phase);
      start_quantized_all_gather(comm_, spec.quant, from, wt, from_len, spec.first_level, spec.last_level, stage,
                                 compute, spec.flat)
          ->wait();
      if (wt == DType::kBF16) round_to_bf16(compute, padded);
    };
  }
  STRATA_CHECK(staging == (wt == DType::kF32 ? 0 : u.padded * dtype_size(wt)),
               "the schedule stages {} bytes for the {} gather of unit {}", staging, dtype_name(wt), op.unit);
  if (wt == DType::kBF16) u.working_bf16 = static_cast<const bf16*>(stage);  // read only after the wait
  return [this, spec, phase, from, from_len, stage, compute, padded, wt] {
    comm_.meter().set_phase(phase);
    start_unit_gather(comm_, spec, from, from_len, stage)->wait();
    if (stage != compute) widen_from(compute, stage, padded, wt);  // bf16 staging
  };
}

namespace {

// The request slot of an op's bucket: slots are made when bucket 0 starts and cleared as their
// waits complete.
std::unique_ptr<CommRequest>& slot(std::vector<std::unique_ptr<CommRequest>>& slots, const ScheduleOp& op) {
  if (op.bucket == 0) {
    STRATA_CHECK(std::all_of(slots.begin(), slots.end(), [](const auto& r) { return r == nullptr; }),
                 "{} of unit {} while the one before is in flight", op_kind_name(op.kind), op.unit);
    slots.clear();
    slots.resize(static_cast<std::size_t>(op.buckets));
  }
  STRATA_CHECK(static_cast<std::size_t>(op.bucket) < slots.size(), "bucket {} of {} of unit {} out of order", op.bucket,
               op.buckets, op.unit);
  return slots[static_cast<std::size_t>(op.bucket)];
}

// Waits for a bucket's request (none: nothing was started, as for a carried wait after a flush).
void wait_slot(std::vector<std::unique_ptr<CommRequest>>& slots, const ScheduleOp& op) {
  if (static_cast<std::size_t>(op.bucket) >= slots.size()) return;
  auto& request = slots[static_cast<std::size_t>(op.bucket)];
  if (request) request->wait();
  request.reset();
}

}  // namespace

void ShardedEngine::start(const ScheduleOp& op) {
  UnitShard& u = shard(op.unit);
  const CollectiveSpec spec = op.comm;
  const TrafficPhase phase = op.phase;
  UnitShard* unit = &u;
  switch (op.kind) {
    case OpKind::kGatherStart:
      u.weights = WeightResidency::kGathering;
      if (op.comm.empty()) {
        // Replicated weights: nothing to gather; bf16 ones are widened for compute.
        if (u.compute) widen_from(reinterpret_cast<float*>(u.compute->data()), u.primary.data(), u.padded, options_.weight_dtype);
        if (options_.weight_dtype == DType::kBF16) u.working_bf16 = reinterpret_cast<const bf16*>(u.primary.data());
        return;
      }
      slot(u.gathers, op) = comm_thread_->post(task_name(op), gather_task(op));
      return;
    case OpKind::kReplicaReduceScatterStart:
      STRATA_CHECK(op.comm.bucketed() ? op.comm.bucket_piece == u.optim_len : op.comm.elements == u.grad_len,
                   "a replica reduce-scatter of unit {} as {} elements", op.unit, op.comm.elements);
      slot(u.replica_tasks, op) = comm_thread_->post(task_name(op), [this, unit, spec, phase] {
        comm_.meter().set_phase(phase);
        reduce_scatter_replicas(comm_, spec, unit->grad_shard.data(), unit->reduced_grad(), scratch_);
      });
      return;
    case OpKind::kReplicaAllReduceStart:
      STRATA_CHECK(op.comm.bucketed() ? op.comm.bucket_piece == u.optim_len : op.comm.elements == u.optim_len,
                   "a replica all-reduce of unit {} as {} elements", op.unit, op.comm.elements);
      slot(u.replica_tasks, op) = comm_thread_->post(task_name(op), [this, unit, spec, phase] {
        comm_.meter().set_phase(phase);
        all_reduce_replicas(comm_, spec, unit->reduced_grad(), scratch_);
      });
      return;
    case OpKind::kGatherUpdatedStart:
      STRATA_CHECK((op.comm.bucketed() ? op.comm.bucket_piece == u.optim_len : op.comm.elements == u.weight_len) &&
                       op.comm.dtype == options_.weight_dtype,
                   "the updated weights of unit {} as {} elements", op.unit, op.comm.elements);
      STRATA_CHECK(op.bucket > 0 || u.primary_state == PrimaryResidency::kCurrent,
                   "a second update of the primary shard of unit {} in flight", op.unit);
      u.primary_state = PrimaryResidency::kUpdating;
      slot(u.updated_tasks, op) = comm_thread_->post(task_name(op), [this, unit, spec, phase] {
        comm_.meter().set_phase(phase);
        gather_updated(comm_, spec, unit->master.data(), unit->optim_len, unit->optim_offset, unit->primary.data(),
                       unit->weight_offset);
      });
      return;
    case OpKind::kReduceScatterStart: {
      STRATA_CHECK(op.comm.bucketed() ? op.comm.bucket_piece == u.grad_len : op.comm.elements == u.padded,
                   "a reduce-scatter of unit {} as {} elements", op.unit, op.comm.elements);
      STRATA_CHECK(u.unit_grad == GradResidency::kOpen || (op.bucket > 0 && u.unit_grad == GradResidency::kReducing),
                   "a reduce-scatter of unit {} whose gradient is {}", op.unit, residency_name(u.unit_grad));
      float* gradient = unit_gradient(op.unit);
      u.unit_grad = GradResidency::kReducing;
      if (op.bucket == 0) {
        u.reductions.clear();
        u.reductions.resize(static_cast<std::size_t>(op.buckets));
      }
      UnitShard::Reduction* r = &u.reductions.at(static_cast<std::size_t>(op.bucket));
      r->task = comm_thread_->post(task_name(op), [this, r, spec, phase, gradient] {
        comm_.meter().set_phase(phase);
        r->reduction = start_unit_reduce_scatter(comm_, spec, gradient, scratch_);
        r->reduction->complete();
      });
      return;
    }
    default: STRATA_CHECK(false, "{} is not a start", op_kind_name(op.kind));
  }
}

void ShardedEngine::wait(const ScheduleOp& op) {
  UnitShard& u = shard(op.unit);
  const bool last = op.bucket + 1 == op.buckets;
  switch (op.kind) {
    case OpKind::kGatherWait:
      STRATA_CHECK(u.weights == WeightResidency::kGathering, "a gather wait of unit {} that is {}", op.unit,
                   residency_name(u.weights));
      wait_slot(u.gathers, op);
      if (last) u.weights = WeightResidency::kGathered;
      return;
    case OpKind::kReduceScatterWait: {
      STRATA_CHECK(static_cast<std::size_t>(op.bucket) < u.reductions.size() && u.unit_grad == GradResidency::kReducing,
                   "a reduce-scatter wait of unit {} without its start", op.unit);
      UnitShard::Reduction& r = u.reductions[static_cast<std::size_t>(op.bucket)];
      STRATA_CHECK(r.task != nullptr, "a reduce-scatter wait of unit {} without its start", op.unit);
      r.task->wait();
      r.task.reset();
      const std::size_t piece = op.comm.elements / static_cast<std::size_t>(
                                                       comm_.topology().span(op.comm.first_level, op.comm.last_level));
      r.reduction->accumulate(u.grad_shard.data() + op.comm.bucket_offset, piece);
      r.reduction.reset();
      if (last) u.unit_grad = GradResidency::kOpen;  // its free effect drops it
      return;
    }
    case OpKind::kReplicaReduceScatterWait:
    case OpKind::kReplicaAllReduceWait:
      STRATA_CHECK(static_cast<std::size_t>(op.bucket) < u.replica_tasks.size() &&
                       u.replica_tasks[static_cast<std::size_t>(op.bucket)] != nullptr,
                   "a replica reduction wait of unit {} without its start", op.unit);
      wait_slot(u.replica_tasks, op);
      return;
    case OpKind::kGatherUpdatedWait:
      // The first step of a run has nothing in flight (and neither has one after a flush).
      wait_slot(u.updated_tasks, op);
      if (last) u.primary_state = PrimaryResidency::kCurrent;
      return;
    default: STRATA_CHECK(false, "{} is not a wait", op_kind_name(op.kind));
  }
}

const float* ShardedEngine::weights(int unit) {
  UnitShard& u = shard(unit);
  STRATA_CHECK(u.weights == WeightResidency::kGathered, "the schedule computes with unit '{}' while it is {}",
               layout().unit(static_cast<std::size_t>(unit)).name, residency_name(u.weights));
  if (u.compute) return reinterpret_cast<const float*>(u.compute->data());
  return reinterpret_cast<const float*>(u.primary.data());  // replicated fp32: compute in place
}

const bf16* ShardedEngine::working_bf16(int unit) {
  return options_.bf16_working_copy ? shard(unit).working_bf16 : nullptr;
}

// Where the table says this backward op writes the unit's gradient (schedule/op_effects): its
// unit-gradient buffer, or the gradient shard in place.
float* ShardedEngine::gradient_target(const ScheduleOp& op, int unit) {
  UnitShard& u = shard(unit);
  for (const Access& a : op_accesses(schedule_, op)) {
    if (a.unit != unit || !a.write) continue;
    if (a.resource == Resource::kGradShard) return u.grad_shard.data();  // accumulate in place
    if (a.resource == Resource::kUnitGrad) {
      STRATA_CHECK(u.grad != nullptr, "the schedule writes the gradient of unit {} without allocating it", unit);
      return reinterpret_cast<float*>(u.grad->data());
    }
  }
  STRATA_CHECK(false, "{} writes no gradient of unit {}", op_kind_name(op.kind), unit);
}

// The unit-gradient buffer a reduce-scatter reads (the table: reduce_scatter_start reads it).
float* ShardedEngine::unit_gradient(int unit) {
  UnitShard& u = shard(unit);
  STRATA_CHECK(u.grad != nullptr, "the schedule reduces the gradient of unit {} without allocating it", unit);
  return reinterpret_cast<float*>(u.grad->data());
}

namespace {

// The i-th of an op's units (weights read or gradients written), as the schedule listed them:
// the embedding {token table}, a block {its unit}, the head {final norm, token table}.
int nth_unit(const std::vector<int>& units, std::size_t i, const ScheduleOp& op, const char* what) {
  STRATA_CHECK(i < units.size(), "{} of stage {} lists {} {} units, fewer than {}", op_kind_name(op.kind),
               static_cast<int>(op.stage), units.size(), what, i + 1);
  return units[i];
}

}  // namespace

// The units, buffers and gradient targets come from the op alone.
void ShardedEngine::compute(const ScheduleOp& op, const SegmentOperands& x) {
  STRATA_CHECK(x.tokens.size() == gpt_.tokens_per_batch() && x.targets.size() == gpt_.tokens_per_batch(),
               "{} with {} tokens for a micro-batch of {}", op_kind_name(op.kind), x.tokens.size(), gpt_.tokens_per_batch());
  const auto w = [&](std::size_t i) {
    const int unit = nth_unit(op.weight_units, i, op, "weight");
    return UnitWeights(weights(unit), working_bf16(unit));
  };
  const auto g = [&](std::size_t i) { return gradient_target(op, nth_unit(op.grad_units, i, op, "gradient")); };
  if (op.kind == OpKind::kForward) {
    switch (op.stage) {
      case ComputeStage::kEmbedding: gpt_.embedding_forward(w(0).f32, x.tokens); break;
      case ComputeStage::kBlock: gpt_.block_forward(op.layer, w(0)); break;
      case ComputeStage::kHead: break;  // returns the loss: see local()
      case ComputeStage::kNone: break;
    }
    return;
  }
  switch (op.stage) {
    case ComputeStage::kHead: gpt_.head_backward(w(0).f32, w(1), g(0), g(1), x.loss_scale); break;
    case ComputeStage::kBlock:
      // The last block: the next block's gather is already in flight there.
      STRATA_REQUIRE(!(comm_.rank() == options_.fail_rank && steps_before_ + steps_run_ == options_.fail_step &&
                       op.layer == layout().config().n_layer - 1),
                     "injected failure (STRATA_INJECT_FAILURE={}:{}) in the backward of block {}", options_.fail_rank,
                     options_.fail_step, op.layer);
      gpt_.block_backward(op.layer, w(0), g(0));
      break;
    case ComputeStage::kEmbedding: gpt_.embedding_backward(g(0)); break;
    case ComputeStage::kNone: break;
  }
}

void ShardedEngine::local(const ScheduleOp& op, const SegmentOperands& x, SegmentResults& results) {
  switch (op.kind) {
    case OpKind::kKeepSecondary: {
      // From the gathered fp32 copy, the values forward computed with (decoded ones under qwZ), so
      // backward computes with the same weights.
      UnitShard& u = shard(op.unit);
      STRATA_CHECK(u.weights == WeightResidency::kGathered && u.secondary && u.compute,
                   "keep_secondary of unit {} without a gathered copy", op.unit);
      narrow_to(u.secondary->data(), reinterpret_cast<const float*>(u.compute->data()) + u.secondary_offset,
                u.secondary_len, options_.weight_dtype);
      u.secondary_state = SecondaryResidency::kHeld;
      return;
    }
    case OpKind::kRelease:
      // Its free effect drops the copy (replicated fp32 weights have none: they compute in place).
      shard(op.unit).weights = WeightResidency::kSharded;
      return;
    case OpKind::kForward:
      if (op.stage == ComputeStage::kHead) {
        compute(op, x);  // the token check
        const int embedding = nth_unit(op.weight_units, 1, op, "weight");
        results.local_loss = gpt_.head_forward(weights(nth_unit(op.weight_units, 0, op, "weight")),
                                               UnitWeights(weights(embedding), working_bf16(embedding)), x.targets);
        return;
      }
      compute(op, x);
      return;
    case OpKind::kBackward: compute(op, x); return;
    case OpKind::kOptimizerStep: {
      const OpScope scope(Op::kOptimizer);
      UnitShard& u = shard(op.unit);
      const UpdateOperands& up = x.update;
      adamw_update_unit_slice(layout().unit(static_cast<std::size_t>(op.unit)),
                              Range{u.optim_offset, u.optim_offset + u.optim_len}, u.master.data(), u.reduced_grad(),
                              u.m.data(), u.v.data(), up.hyper, static_cast<float>(up.lr), up.step, up.grad_scale);
      return;
    }
    case OpKind::kBumpEpoch: weights_changed(); return;
    default: STRATA_CHECK(false, "{} is not local work", op_kind_name(op.kind));
  }
}

void ShardedEngine::blocking(const ScheduleOp& op, const SegmentOperands& x, SegmentResults& results) {
  switch (op.kind) {
    case OpKind::kLossReduce: {
      double loss = results.local_loss;
      if (!op.comm.empty()) {
        run_collective(op, [&] { comm_.all_reduce_control(&loss, 1, op.comm.first_level, op.comm.last_level); });
      }
      // Every rank's loss is a mean over its rows; the global mean is their average.
      results.loss = loss / comm_.world_size();
      return;
    }
    case OpKind::kGradNorm: {
      const OpScope scope(Op::kGradNorm);
      double sum = 0.0;
      for (const auto& s : units_) sum += sum_of_squares(s->reduced_grad(), s->optim_len);
      if (!op.comm.empty()) {
        run_collective(op, [&] { comm_.all_reduce_control(&sum, 1, op.comm.first_level, op.comm.last_level); });
      }
      results.norm = std::sqrt(sum);
      return;
    }
    case OpKind::kAgreeStop: {
      double stop = x.update.stop_requested ? 1.0 : 0.0;
      if (!op.comm.empty()) {
        run_collective(op, [&] {
          comm_.all_reduce_control(&stop, 1, op.comm.first_level, op.comm.last_level, ControlOp::kMax);
        });
      }
      results.stop = stop != 0.0;
      return;
    }
    default: STRATA_CHECK(false, "{} is not a blocking collective", op_kind_name(op.kind));
  }
}

std::string ShardedEngine::task_name(const ScheduleOp& op) const {
  std::string name = op_kind_name(op.kind);
  if (op.unit >= 0) name += " " + schedule_.unit_names.at(static_cast<std::size_t>(op.unit));
  return name;
}

// A blocking collective: on the communication thread (the only one making MPI calls while a
// segment runs), with the op's phase on the meter.
void ShardedEngine::run_collective(const ScheduleOp& op, const std::function<void()>& work) {
  const TrafficPhase phase = op.phase;
  comm_thread_->run(task_name(op), [this, phase, &work] {
    comm_.meter().set_phase(phase);
    work();
  });
}

void ShardedEngine::execute(const ScheduleOp& op) {
  SegmentResults ignored;
  execute(op, SegmentOperands{}, ignored);
}

void ShardedEngine::execute(const ScheduleOp& op, const SegmentOperands& operands, SegmentResults& results) {
  const std::int64_t begin = options_.record_timeline ? steady_now_ns() : 0;
  const OpKindInfo& info = op_kind_info(op.kind);
  for (const BufferEffect& b : op.alloc) acquire_buffer(b);
  check_accesses(op);
  switch (info.sync) {
    case OpSync::kLocal: local(op, operands, results); break;
    case OpSync::kStart: start(op); break;
    case OpSync::kWait: wait(op); break;
    case OpSync::kBlocking: blocking(op, operands, results); break;
  }
  for (const BufferEffect& b : op.free) release_buffer(b);
  if (record_executed_) executed_.push_back({op.kind, info.sync, op.alloc, op.free});
  if (options_.record_timeline) compute_spans_.push_back({task_name(op), begin, steady_now_ns()});
}

SegmentResults ShardedEngine::run(const StepSchedule& schedule, int segment, const SegmentOperands& operands) {
  SegmentResults results;
  for (int i : segment_order(schedule, segment, options_.shuffle_seed)) {
    execute(schedule.ops[static_cast<std::size_t>(i)], operands, results);
  }
  // The meter's phase is set by each task on the communication thread, which may still be running
  // one of this segment's (the boundary overlaps the next step): never from here.
  return results;
}

// ---- the TrainingEngine interface ----------------------------------------------------------

void ShardedEngine::flush() {
  for (auto& u : units_) {
    for (auto& r : u->replica_tasks) {
      if (r) r->wait();
    }
    u->replica_tasks.clear();
    for (auto& r : u->updated_tasks) {
      if (r) r->wait();
    }
    u->updated_tasks.clear();
    u->primary_state = PrimaryResidency::kCurrent;
  }
}

void ShardedEngine::zero_grad() {
  STRATA_REQUIRE(micro_ == 0 || micro_ == options_.grad_accum,
                 "zero_grad in the middle of a step ({} of {} micro-batches run)", micro_, options_.grad_accum);
  for (auto& u : units_) u->grad_shard.fill_zero();
  micro_ = 0;
  reduced_ = false;
}

float ShardedEngine::forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                                      float loss_scale) {
  STRATA_REQUIRE(micro_ < options_.grad_accum,
                 "forward_backward called for micro-batch {} of a step the schedule gives {} micro-batches", micro_ + 1,
                 options_.grad_accum);
  SegmentOperands x;
  x.tokens = inputs;
  x.targets = targets;
  // Each rank's gradient carries 1 / world, so the reductions are plain sums.
  x.loss_scale = loss_scale / static_cast<float>(comm_.world_size());
  const SegmentResults r = run(schedule_, micro_, x);
  ++micro_;
  return static_cast<float>(r.loss);
}

float ShardedEngine::evaluate(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  flush();  // evaluation sees the updated weights
  SegmentOperands x;
  x.tokens = inputs;
  x.targets = targets;
  return static_cast<float>(run(eval_schedule_, 0, x).loss);
}

double ShardedEngine::grad_norm() {
  STRATA_REQUIRE(micro_ == options_.grad_accum, "the gradient norm after {} of the step's {} micro-batches", micro_,
                 options_.grad_accum);
  if (!reduced_) norm_ = run(schedule_, reduce_segment_, SegmentOperands{}).norm;
  reduced_ = true;
  return norm_;
}

bool ShardedEngine::optimizer_step(const UpdateOperands& update) {
  grad_norm();
  SegmentOperands x;
  x.update = update;
  const SegmentResults r = run(schedule_, update_segment_, x);
  reduced_ = false;
  micro_ = 0;
  ++steps_run_;
  const std::int64_t now = steady_now_ns();
  if (options_.overlap && options_.tune_overlap && tuner_.deciding()) {
    if (tuner_.record(static_cast<double>(now - step_end_ns_) * 1e-9)) {
      // Every rank keeps the same mode: the decision is on the mean of the ranks' medians. On the
      // communication stream, behind the boundary's collectives still in flight (this happens once).
      std::array<double, 2> medians = tuner_.medians();
      comm_thread_->run("agree on the overlap trial", [&] {
        comm_.all_reduce_control(medians.data(), 2, 0, comm_.topology().level_count() - 1);
      });
      tuner_.decide(medians[0] / comm_.world_size(), medians[1] / comm_.world_size());
    }
    comm_thread_->set_threaded(tuner_.threaded());
  }
  step_end_ns_ = steady_now_ns();
  return r.stop;
}

}  // namespace strata
