// The sharding engine: the op dispatch of the step schedule and the TrainingEngine interface.
#include "engine/sharded_engine.hpp"

#include <algorithm>
#include <cstring>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "engine/unit_collectives.hpp"
#include "engine/unit_tasks.hpp"
#include "schedule/validate.hpp"

namespace strata {

ShardedEngine::ShardedEngine(const GptConfig& config, int batch, int seq_len, std::uint64_t seed, Communicator& comm,
                             ShardedEngineOptions options)
    : comm_(comm), options_(std::move(options)), gpt_(config, batch, seq_len, options_.activation_checkpointing) {
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
  states_ = unit_lifecycles(schedule_);
  timeline_ = EngineTimeline(options_.record_timeline);
  failure_ = {options_.fail_rank, options_.fail_step, layout().config().n_layer - 1};
}

ShardedEngine::~ShardedEngine() = default;

std::span<const unsigned char> ShardedEngine::secondary_copy(int unit) const {
  const UnitShard& u = *units_.at(static_cast<std::size_t>(unit));
  const std::string& name = layout().unit(static_cast<std::size_t>(unit)).name;
  STRATA_REQUIRE(u.secondary_len != 0, "unit '{}' has no secondary copy under plan {}", name, options_.plan.name);
  states_.at(static_cast<std::size_t>(unit)).require_secondary_readable("reading it");
  return {u.secondary->data(), u.secondary->size()};
}

// ---- buffers the schedule allocates ---------------------------------------------------------

void ShardedEngine::acquire_buffer(const BufferEffect& b) {
  UnitShard& u = shard(b.unit);
  const std::uint64_t fp32 = u.padded * sizeof(float);
  switch (b.kind) {
    case BufferKind::kGathered: {
      STRATA_CHECK(!u.compute, "unit {} is gathered twice", b.unit);
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
      // The backward that opens it writes the unit whole (schedule/op_effects: writes_gradient_whole);
      // only the padding past the unit's last element would be left unwritten.
      u.grad = scheduled_.acquire(b.bytes, false);
      {
        const std::size_t written = layout().unit(static_cast<std::size_t>(b.unit)).numel * sizeof(float);
        std::memset(u.grad->data() + written, 0, b.bytes - written);
      }
      break;
    case BufferKind::kCount: break;
  }
  ledger_.allocate(b);
}

void ShardedEngine::release_buffer(const BufferEffect& b) {
  UnitShard& u = shard(b.unit);
  switch (b.kind) {
    case BufferKind::kGathered:
      scheduled_.release(std::move(u.compute));
      scheduled_.release(std::move(u.staging));
      u.working_bf16 = nullptr;
      break;
    case BufferKind::kSecondary: scheduled_.release(std::move(u.secondary)); break;
    case BufferKind::kUnitGrad: scheduled_.release(std::move(u.grad)); break;
    case BufferKind::kCount: break;
  }
  ledger_.free(b);
}

void ShardedEngine::invalidate_secondaries() {
  for (UnitLifecycle& s : states_) s.invalidate_secondary();
}

// ---- the ops --------------------------------------------------------------------------------

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
  const auto post = [&](std::vector<std::unique_ptr<CommRequest>>& slots, CollectiveTask task) {
    slot(slots, op) = comm_thread_->post(task_name(op), std::move(task));
  };
  switch (op.kind) {
    case OpKind::kGatherStart:
      if (op.comm.empty()) {
        // Replicated weights: nothing to gather; bf16 ones are widened for compute.
        if (u.compute) widen_from(reinterpret_cast<float*>(u.compute->data()), u.primary.data(), u.padded, options_.weight_dtype);
        if (options_.weight_dtype == DType::kBF16) u.working_bf16 = reinterpret_cast<const bf16*>(u.primary.data());
        return;
      }
      post(u.gathers, gather_task(comm_, scratch_, u, op, options_.weight_dtype,
                                  op.source == WeightSource::kSecondary ? secondary_copy(op.unit).data() : u.primary.data()));
      return;
    case OpKind::kReplicaReduceScatterStart: post(u.replica_tasks, replica_reduce_scatter_task(comm_, scratch_, u, op)); return;
    case OpKind::kReplicaAllReduceStart: post(u.replica_tasks, replica_all_reduce_task(comm_, scratch_, u, op)); return;
    case OpKind::kGatherUpdatedStart: post(u.updated_tasks, gather_updated_task(comm_, u, op, options_.weight_dtype)); return;
    case OpKind::kReduceScatterStart: {
      CollectiveTask task = reduce_scatter_task(comm_, scratch_, u, op);
      u.reductions[static_cast<std::size_t>(op.bucket)].task = comm_thread_->post(task_name(op), std::move(task));
      return;
    }
    default: STRATA_CHECK(false, "{} is not a start", op_kind_name(op.kind));
  }
}

void ShardedEngine::wait(const ScheduleOp& op) {
  UnitShard& u = shard(op.unit);
  switch (op.kind) {
    case OpKind::kGatherWait: wait_slot(u.gathers, op); return;
    case OpKind::kReduceScatterWait: {
      STRATA_CHECK(static_cast<std::size_t>(op.bucket) < u.reductions.size(),
                   "a reduce-scatter wait of unit {} without its start", op.unit);
      UnitShard::Reduction& r = u.reductions[static_cast<std::size_t>(op.bucket)];
      STRATA_CHECK(r.task != nullptr, "a reduce-scatter wait of unit {} without its start", op.unit);
      r.task->wait();
      r.task.reset();
      const std::size_t piece = op.comm.elements / static_cast<std::size_t>(
                                                       comm_.topology().span(op.comm.first_level, op.comm.last_level));
      r.reduction->accumulate(u.grad_shard.data() + op.comm.bucket_offset, piece);
      r.reduction.reset();
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
      return;
    default: STRATA_CHECK(false, "{} is not a wait", op_kind_name(op.kind));
  }
}

std::string ShardedEngine::task_name(const ScheduleOp& op) const {
  std::string name = op_kind_name(op.kind);
  if (op.unit >= 0) name += " " + schedule_.unit_names.at(static_cast<std::size_t>(op.unit));
  return name;
}


void ShardedEngine::execute(const ScheduleOp& op, const SegmentOperands& operands, SegmentResults& results) {
  update_ = operands.update;
  OpContext c = context(operands);
  c.local_loss = results.local_loss;  // the results go on from op to op, as in a segment
  c.loss = results.loss;
  c.norm = results.norm;
  c.stop = results.stop;
  execute(op, c);
  results = {c.local_loss, c.loss, c.norm, c.stop};
}

void ShardedEngine::execute(const ScheduleOp& op, OpContext& context) {
  const std::int64_t begin = timeline_.begin();
  const OpKindInfo& info = op_kind_info(op.kind);
  apply_op(schedule_, op, states_);
  for (const BufferEffect& b : op.alloc) acquire_buffer(b);
  failure_.before(op, comm_.rank(), steps_before_ + steps_run_);
  switch (info.sync) {
    case OpSync::kLocal: local(op, context); break;
    case OpSync::kStart: start(op); break;
    case OpSync::kWait: wait(op); break;
    case OpSync::kBlocking: blocking(op, context); break;
  }
  for (const BufferEffect& b : op.free) release_buffer(b);
  if (record_executed_) executed_.push_back({op.kind, info.sync, op.alloc, op.free});
  if (timeline_.enabled()) timeline_.record(task_name(op), begin);
}

OpContext ShardedEngine::context(const SegmentOperands& operands) {
  OpContext c;
  c.tokens = operands.tokens;
  c.targets = operands.targets;
  c.loss_scale = operands.loss_scale;
  c.stop_requested = operands.update.stop_requested;
  return c;
}

SegmentResults ShardedEngine::run(const StepSchedule& schedule, int segment, const SegmentOperands& operands) {
  update_ = operands.update;
  OpContext c = context(operands);
  run_segment(schedule, segment, *this, c, options_.shuffle_seed);
  // The meter's phase is set by each task on the communication thread, which may still be running
  // one of this segment's (the boundary overlaps the next step): never from here.
  return {c.local_loss, c.loss, c.norm, c.stop};
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
  }
  for (UnitLifecycle& s : states_) s.settle_update();
}

void ShardedEngine::zero_grad() {
  STRATA_REQUIRE(micro_ == 0 || micro_ == options_.grad_accum,
                 "zero_grad in the middle of a step ({} of {} micro-batches run)", micro_, options_.grad_accum);
  // A shard the backward writes in place is written whole by the first micro-batch; one the
  // reductions add into starts from zero.
  if (gradient_resource(schedule_) != Resource::kGradShard) {
    for (auto& u : units_) u->grad_shard.fill_zero();
  }
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
  if (options_.overlap && options_.tune_overlap) tuner_.end_step(static_cast<double>(now - step_end_ns_) * 1e-9, *comm_thread_, comm_);
  step_end_ns_ = steady_now_ns();
  return r.stop;
}

}  // namespace strata
