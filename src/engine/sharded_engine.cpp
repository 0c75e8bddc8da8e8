// The sharding engine: the op dispatch of the step schedule and the TrainingEngine interface.
#include "engine/sharded_engine.hpp"

#include <fmt/format.h>

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
#include "schedule/chrome_trace.hpp"
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

  ScheduleInputs in;
  in.layout = &layout();
  in.topology = &t;
  in.plan = options_.plan;
  in.grad_accum = options_.grad_accum;
  in.tokens_per_micro = gpt_.tokens_per_batch();
  in.seq_len = seq_len;
  in.weight_dtype = options_.weight_dtype;
  in.grad_dtype = options_.grad_dtype;
  in.prefetch = options_.prefetch;
  in.max_live_bytes = options_.max_live_bytes;
  schedule_ = build_step_schedule(in);
  in.mode = ScheduleMode::kEvaluate;
  eval_schedule_ = build_step_schedule(in);
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
  STRATA_REQUIRE(!options_.overlap || comm_.allows_comm_thread(),
                 "overlap needs an MPI library that gives MPI_THREAD_SERIALIZED (the communication thread makes the "
                 "MPI calls); this one does not: run with --overlap 0");
  CommThread::Options threading;
  threading.threaded = options_.overlap;
  threading.record_spans = options_.record_timeline;
  threading.max_delay_us = options_.inject_delay_us;
  threading.seed = static_cast<std::uint64_t>(comm_.rank()) + 1;
  comm_thread_ = std::make_unique<CommThread>(threading);
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
      {"compute (schedule ops)", options_.overlap ? "communication thread" : "communication (inline)"}, spans));
}

std::span<const unsigned char> ShardedEngine::secondary_copy(int unit) const {
  const UnitShard& u = *units_.at(static_cast<std::size_t>(unit));
  const std::string& name = layout().unit(static_cast<std::size_t>(unit)).name;
  STRATA_REQUIRE(u.secondary_len != 0, "unit '{}' has no secondary copy under plan {}", name, options_.plan.name);
  STRATA_REQUIRE(u.secondary != nullptr,
                 "the secondary copy of unit '{}' is not held: it is made in forward and dropped once backward has "
                 "gathered from it",
                 name);
  STRATA_REQUIRE(u.secondary_epoch == epoch_,
                 "the secondary copy of unit '{}' is stale: made at weight epoch {}, the weights are at epoch {}", name,
                 u.secondary_epoch, epoch_);
  return {u.secondary->data(), u.secondary->size()};
}

std::string ShardedEngine::description() const {
  const Topology& t = comm_.topology();
  const std::string bound =
      options_.max_live_bytes == 0 ? "" : fmt::format(" (at most {} gathered bytes)", options_.max_live_bytes);
  return fmt::format("sharded | topology {} | plan {}: {} | {} | prefetch {}{} | overlap {}", t.to_string(),
                     options_.plan.name, options_.plan.describe(t), dtype_name(options_.weight_dtype),
                     options_.prefetch, bound, options_.overlap ? "on (communication thread)" : "off");
}

nlohmann::json ShardedEngine::traffic_totals() { return job_traffic_totals(*this); }

std::string ShardedEngine::report() {
  std::string out = format_plan_report(plan_report(*this));
  const OverlapStats o = overlap_stats();
  if (o.collectives > 0) {
    out += fmt::format(
        "communication (this rank): {:.3f} s in {} collectives, of which compute waited {:.3f} s: {:.0f}% hidden "
        "(overlap {})\n",
        o.communication_s, o.collectives, o.exposed_s, 100.0 * o.hidden_fraction(), options_.overlap ? "on" : "off");
  }
  return out;
}

// ---- buffers the schedule allocates ---------------------------------------------------------

void ShardedEngine::acquire_buffer(const BufferEffect& b) {
  UnitShard& u = shard(b.unit);
  const std::uint64_t fp32 = u.padded * sizeof(float);
  switch (b.kind) {
    case BufferKind::kGathered: {
      STRATA_CHECK(!u.compute && !u.staging, "unit {} is gathered twice", b.unit);
      STRATA_CHECK(b.bytes >= fp32, "the schedule allocates {} bytes for gathering unit {}, less than its {} fp32 bytes",
                   b.bytes, b.unit, fp32);
      u.compute = scheduled_.acquire(fp32, false);
      // The staging area (blobs, or a bf16 copy) is checked against the gather that uses it.
      if (b.bytes > fp32) u.staging = scheduled_.acquire(b.bytes - fp32, false);
      break;
    }
    case BufferKind::kSecondary:
      STRATA_CHECK(!u.secondary && b.bytes == u.secondary_len * dtype_size(options_.weight_dtype),
                   "the secondary copy of unit {}: {} bytes allocated, {} elements held", b.unit, b.bytes, u.secondary_len);
      u.secondary = scheduled_.acquire(b.bytes, false);
      break;
    case BufferKind::kUnitGrad:
      STRATA_CHECK(!u.grad && b.bytes == fp32, "the unit gradient of unit {}: {} bytes for {} elements", b.unit, b.bytes,
                   u.padded);
      u.grad = scheduled_.acquire(b.bytes, true);
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
      STRATA_CHECK(!u.gather, "unit {} is released while its gather is in flight", b.unit);
      scheduled_.release(std::move(u.compute));
      scheduled_.release(std::move(u.staging));
      u.gather_waited = false;
      break;
    case BufferKind::kSecondary: scheduled_.release(std::move(u.secondary)); break;
    case BufferKind::kUnitGrad:
      STRATA_CHECK(!u.reduction, "the gradient of unit {} is freed while its reduction is in flight", b.unit);
      scheduled_.release(std::move(u.grad));
      break;
    case BufferKind::kCount: break;
  }
  live_by_kind_[static_cast<std::size_t>(b.kind)] -= b.bytes;
}

// ---- the ops --------------------------------------------------------------------------------

void ShardedEngine::start_gather(const ScheduleOp& op) {
  UnitShard& u = shard(op.unit);
  const DType wt = options_.weight_dtype;
  u.gather_waited = false;
  if (op.comm.empty()) {
    // Replicated weights: nothing to gather; bf16 ones are widened for compute.
    if (u.compute) widen_from(reinterpret_cast<float*>(u.compute->data()), u.primary.data(), u.padded, wt);
    return;
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
    u.gather = comm_thread_->post(task_name(op), [this, spec, phase, from, wt, from_len, stage, compute, padded] {
      comm_.meter().set_phase(phase);
      start_quantized_all_gather(comm_, spec.quant, from, wt, from_len, spec.first_level, spec.last_level, stage,
                                 compute)
          ->wait();
      if (wt == DType::kBF16) round_to_bf16(compute, padded);
    });
    return;
  }
  STRATA_CHECK(staging == (wt == DType::kF32 ? 0 : u.padded * dtype_size(wt)),
               "the schedule stages {} bytes for the {} gather of unit {}", staging, dtype_name(wt), op.unit);
  u.gather = comm_thread_->post(task_name(op), [this, spec, phase, from, from_len, stage, compute, padded, wt] {
    comm_.meter().set_phase(phase);
    start_unit_gather(comm_, spec, from, from_len, stage)->wait();
    if (stage != compute) widen_from(compute, stage, padded, wt);  // bf16 staging
  });
}

void ShardedEngine::wait_gather(const ScheduleOp& op) {
  UnitShard& u = shard(op.unit);
  if (u.gather) {
    u.gather->wait();
    u.gather.reset();
  }
  u.gather_waited = true;
}

// From the gathered fp32 copy, the values forward computed with (decoded ones under qwZ), so
// backward computes with the same weights.
void ShardedEngine::keep_secondary(const ScheduleOp& op) {
  UnitShard& u = shard(op.unit);
  STRATA_CHECK(u.gather_waited && u.secondary && u.compute, "keep_secondary of unit {} without a gathered copy", op.unit);
  narrow_to(u.secondary->data(), reinterpret_cast<const float*>(u.compute->data()) + u.secondary_offset, u.secondary_len,
            options_.weight_dtype);
  u.secondary_epoch = epoch_;
}

const float* ShardedEngine::weights(int unit) {
  UnitShard& u = shard(unit);
  STRATA_CHECK(u.gather_waited, "the schedule computes with unit '{}' before its gather completed",
               layout().unit(static_cast<std::size_t>(unit)).name);
  if (u.compute) return reinterpret_cast<const float*>(u.compute->data());
  return reinterpret_cast<const float*>(u.primary.data());  // replicated fp32: compute in place
}

float* ShardedEngine::grad_target(int unit) {
  UnitShard& u = shard(unit);
  if (options_.plan.grads == kReplicated) return u.grad_shard.data();  // accumulate in place
  STRATA_CHECK(u.grad != nullptr, "the schedule writes the gradient of unit {} without allocating it", unit);
  return reinterpret_cast<float*>(u.grad->data());
}

void ShardedEngine::compute(const ScheduleOp& op) {
  const auto emb = static_cast<int>(ModelLayout::kEmbeddingUnit);
  const auto fin = static_cast<int>(layout().final_norm_unit());
  if (op.kind == OpKind::kForward) {
    switch (op.stage) {
      case ComputeStage::kEmbedding: gpt_.embedding_forward(weights(emb), tokens_); break;
      case ComputeStage::kBlock: gpt_.block_forward(op.layer, weights(op.unit)); break;
      case ComputeStage::kHead: loss_ = gpt_.head_forward(weights(fin), weights(emb), targets_); break;
      case ComputeStage::kNone: break;
    }
    return;
  }
  switch (op.stage) {
    case ComputeStage::kHead:
      gpt_.head_backward(weights(fin), weights(emb), grad_target(fin), grad_target(emb), loss_scale_);
      break;
    case ComputeStage::kBlock:
      // The last block: the next block's gather is already in flight there.
      STRATA_REQUIRE(!(comm_.rank() == options_.fail_rank && steps_run_ == options_.fail_step &&
                       op.layer == layout().config().n_layer - 1),
                     "injected failure (STRATA_INJECT_FAILURE={}:{}) in the backward of block {}", options_.fail_rank,
                     options_.fail_step, op.layer);
      gpt_.block_backward(op.layer, weights(op.unit), grad_target(op.unit));
      break;
    case ComputeStage::kEmbedding: gpt_.embedding_backward(grad_target(emb)); break;
    case ComputeStage::kNone: break;
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
  const std::int64_t begin = options_.record_timeline ? steady_now_ns() : 0;
  execute_op(op);
  if (options_.record_timeline) compute_spans_.push_back({task_name(op), begin, steady_now_ns()});
}

void ShardedEngine::execute_op(const ScheduleOp& op) {
  for (const BufferEffect& b : op.alloc) acquire_buffer(b);
  UnitShard* u = op.unit >= 0 ? &shard(op.unit) : nullptr;
  switch (op.kind) {
    case OpKind::kGatherStart: start_gather(op); break;
    case OpKind::kGatherWait: wait_gather(op); break;
    case OpKind::kKeepSecondary: keep_secondary(op); break;
    case OpKind::kRelease: break;  // its free effect drops the copy
    case OpKind::kForward:
    case OpKind::kBackward: compute(op); break;
    case OpKind::kLossReduce: {
      double loss = loss_;
      if (!op.comm.empty()) {
        run_collective(op, [&] { comm_.all_reduce_control(&loss, 1, op.comm.first_level, op.comm.last_level); });
      }
      // Every rank's loss is a mean over its rows; the global mean is their average.
      reduced_loss_ = loss / comm_.world_size();
      break;
    }
    case OpKind::kReduceScatterStart: {
      STRATA_CHECK(op.comm.elements == u->padded, "a reduce-scatter of unit {} as {} elements", op.unit, op.comm.elements);
      STRATA_CHECK(!u->reduce_task, "a second reduce-scatter of unit {} while one is in flight", op.unit);
      const CollectiveSpec spec = op.comm;
      const TrafficPhase phase = op.phase;
      float* gradient = grad_target(op.unit);
      u->reduce_task = comm_thread_->post(task_name(op), [this, u, spec, phase, gradient] {
        comm_.meter().set_phase(phase);
        u->reduction = start_unit_reduce_scatter(comm_, spec, gradient, scratch_);
        u->reduction->complete();
      });
      break;
    }
    case OpKind::kReduceScatterWait:
      STRATA_CHECK(u->reduce_task != nullptr, "a reduce-scatter wait of unit {} without its start", op.unit);
      u->reduce_task->wait();
      u->reduce_task.reset();
      u->reduction->accumulate(u->grad_shard.data(), u->grad_len);
      u->reduction.reset();
      break;
    case OpKind::kReduceScatterReplicas:
      STRATA_CHECK(op.comm.elements == u->grad_len, "a replica reduce-scatter of unit {} as {} elements", op.unit,
                   op.comm.elements);
      run_collective(op, [&] {
        reduce_scatter_replicas(comm_, op.comm, u->grad_shard.data(), u->grad_shard.data() + u->reduced_offset, scratch_);
      });
      break;
    case OpKind::kAllReduceReplicas:
      STRATA_CHECK(op.comm.elements == u->optim_len, "a replica all-reduce of unit {} as {} elements", op.unit,
                   op.comm.elements);
      run_collective(op, [&] { all_reduce_replicas(comm_, op.comm, u->grad_shard.data() + u->reduced_offset, scratch_); });
      break;
    case OpKind::kGradNorm: {
      const OpScope scope(Op::kGradNorm);
      double sum = 0.0;
      for (const auto& s : units_) sum += sum_of_squares(s->grad_shard.data() + s->reduced_offset, s->optim_len);
      if (!op.comm.empty()) {
        run_collective(op, [&] { comm_.all_reduce_control(&sum, 1, op.comm.first_level, op.comm.last_level); });
      }
      norm_ = std::sqrt(sum);
      break;
    }
    case OpKind::kOptimizerStep: {
      const OpScope scope(Op::kOptimizer);
      adamw_update_unit_slice(layout().unit(static_cast<std::size_t>(op.unit)),
                              Range{u->optim_offset, u->optim_offset + u->optim_len}, u->master.data(),
                              u->grad_shard.data() + u->reduced_offset, u->m.data(), u->v.data(), hyper_, lr_, step_,
                              clip_scale_);
      break;
    }
    case OpKind::kGatherUpdated:
      STRATA_CHECK(op.comm.elements == u->weight_len && op.comm.dtype == options_.weight_dtype,
                   "the updated weights of unit {} as {} elements", op.unit, op.comm.elements);
      run_collective(op, [&] {
        gather_updated(comm_, op.comm, u->master.data(), u->optim_len, u->optim_offset, u->primary.data(),
                       u->weight_offset);
      });
      break;
    case OpKind::kBumpEpoch: ++epoch_; break;
  }
  for (const BufferEffect& b : op.free) release_buffer(b);
}

void ShardedEngine::run(int segment) {
  run_segment(schedule_, segment, *this, options_.shuffle_seed);
  comm_.meter().set_phase(TrafficPhase::kOther);
}

// ---- the TrainingEngine interface ----------------------------------------------------------

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
  tokens_ = inputs;
  targets_ = targets;
  // Each rank's gradient carries 1 / world, so the reductions are plain sums.
  loss_scale_ = loss_scale / static_cast<float>(comm_.world_size());
  run(micro_);
  ++micro_;
  return static_cast<float>(reduced_loss_);
}

float ShardedEngine::evaluate(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  tokens_ = inputs;
  targets_ = targets;
  run_segment(eval_schedule_, 0, *this, options_.shuffle_seed);
  comm_.meter().set_phase(TrafficPhase::kOther);
  return static_cast<float>(reduced_loss_);
}

double ShardedEngine::grad_norm() {
  STRATA_REQUIRE(micro_ == options_.grad_accum, "the gradient norm after {} of the step's {} micro-batches", micro_,
                 options_.grad_accum);
  if (!reduced_) run(reduce_segment_);
  reduced_ = true;
  return norm_;
}

void ShardedEngine::optimizer_step(const AdamWHyper& hyper, double lr, int step, float grad_scale) {
  grad_norm();
  hyper_ = hyper;
  lr_ = static_cast<float>(lr);
  step_ = step;
  clip_scale_ = grad_scale;
  run(update_segment_);
  reduced_ = false;
  micro_ = 0;
  ++steps_run_;
}

}  // namespace strata
