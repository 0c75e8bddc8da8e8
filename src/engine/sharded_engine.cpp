// The sharding engine: state layout per rank, and the executor of the step schedule.
#include "zero/sharded_engine.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "comm/hierarchical.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/op_profile.hpp"
#include "model/init.hpp"
#include "train/adamw.hpp"
#include "train/checkpoint.hpp"
#include "train/grad_norm.hpp"
#include "zero/plan_formulas.hpp"

namespace strata {

struct ShardedEngine::UnitState {
  std::size_t numel = 0, padded = 0;
  // Element ranges of this rank's shards, in unit coordinates.
  std::size_t weight_offset = 0, weight_len = 0;
  std::size_t secondary_offset = 0, secondary_len = 0;
  std::size_t grad_offset = 0, grad_len = 0;
  std::size_t optim_offset = 0, optim_len = 0;
  std::size_t reduced_offset = 0;  // the optimizer slice inside the gradient shard

  AlignedBuffer<unsigned char> primary;    // weight_len working-dtype elements
  AlignedBuffer<unsigned char> secondary;  // secondary_len working-dtype elements (blocks only)
  std::uint64_t secondary_epoch = 0;       // 0: never made
  AlignedBuffer<float> grad_shard;         // grad_len
  AlignedBuffer<float> master, m, v;       // optim_len

  // Transient during a step.
  ScratchPool::Buffer compute;  // fp32, padded: the gathered unit
  ScratchPool::Buffer staging;  // working dtype, padded (bf16 only): the gathered unit before widening
  std::unique_ptr<CommRequest> pending;
  bool gathered = false;
  ScratchPool::Buffer grad;  // fp32, padded: this micro-batch's unit gradient (sharded gradients only)
};

namespace {

// Converts n fp32 values into the working dtype at `out`.
void narrow(void* out, const float* in, std::size_t n, DType type) {
  if (type == DType::kBF16) {
    fp32_to_bf16(static_cast<bf16*>(out), in, n);
  } else {
    std::memcpy(out, in, n * sizeof(float));
  }
}

void widen(float* out, const void* in, std::size_t n, DType type) {
  if (type == DType::kBF16) {
    bf16_to_fp32(out, static_cast<const bf16*>(in), n);
  } else {
    std::memcpy(out, in, n * sizeof(float));
  }
}

void add_into(float* out, const float* in, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) out[i] += in[i];
}

unsigned char* byte_at(void* base, std::size_t elements, DType type) {
  return static_cast<unsigned char*>(base) + elements * dtype_size(type);
}

}  // namespace

ShardedEngine::ShardedEngine(const GptConfig& config, int batch, int seq_len, std::uint64_t seed, Communicator& comm,
                             ShardedEngineOptions options)
    : comm_(comm), options_(std::move(options)), gpt_(config, batch, seq_len) {
  STRATA_REQUIRE(options_.weight_dtype == DType::kF32 || options_.weight_dtype == DType::kBF16,
                 "working weights must be fp32 or bf16");
  STRATA_REQUIRE(options_.grad_dtype == DType::kF32 || options_.grad_dtype == DType::kBF16,
                 "communicated gradients must be fp32 or bf16");
  const Topology& t = comm_.topology();
  const ShardPlan& plan = options_.plan;
  plan.validate(t);
  const int rank = comm_.rank();
  const std::vector<std::size_t> padded = padded_unit_sizes(layout(), t);

  ScheduleInputs in;
  in.layout = &layout();
  in.padded_numel = padded;
  in.plan = plan;
  in.topology = &t;
  in.grad_accum = options_.grad_accum;
  in.tokens_per_micro = gpt_.tokens_per_batch();
  in.seq_len = seq_len;
  in.weight_dtype = options_.weight_dtype;
  in.grad_dtype = options_.grad_dtype;
  in.prefetch = options_.prefetch;
  schedule_ = build_step_schedule(in);
  for (const auto& op : schedule_.ops) {
    if (op.micro == 0) micro_ops_.push_back(op);
    if (op.micro == -1) (update_ops_.empty() && op.kind != OpKind::kOptimizerStep ? reduce_ops_ : update_ops_).push_back(op);
  }
  in.forward_only = true;
  eval_ops_ = build_step_schedule(in).ops;
  if (const char* inject = std::getenv("STRATA_INJECT_FAILURE")) {
    STRATA_REQUIRE(std::sscanf(inject, "%d:%d", &fail_rank_, &fail_step_) == 2,
                   "STRATA_INJECT_FAILURE must read rank:step (got '{}')", inject);
  }

  const std::size_t ew = dtype_size(options_.weight_dtype);
  AlignedBuffer<float> full;
  for (std::size_t i = 0; i < layout().unit_count(); ++i) {
    auto u = std::make_unique<UnitState>();
    u->numel = layout().unit(i).numel;
    u->padded = padded[i];
    u->weight_len = u->padded / static_cast<std::size_t>(t.span(plan.weights));
    u->weight_offset = shard_offset(t, rank, u->padded, 0, plan.weights);
    if (plan.has_secondary() && layout().unit(i).kind == UnitKind::kBlock) {
      u->secondary_len = u->padded / static_cast<std::size_t>(t.span(plan.secondary));
      u->secondary_offset = shard_offset(t, rank, u->padded, 0, plan.secondary);
      u->secondary = AlignedBuffer<unsigned char>(u->secondary_len * ew);
    }
    u->grad_len = u->padded / static_cast<std::size_t>(t.span(plan.grads));
    u->grad_offset = shard_offset(t, rank, u->padded, 0, plan.grads);
    u->optim_len = u->padded / static_cast<std::size_t>(t.span(plan.optimizer));
    u->optim_offset = shard_offset(t, rank, u->padded, 0, plan.optimizer);
    u->reduced_offset = u->optim_offset - u->grad_offset;
    u->primary = AlignedBuffer<unsigned char>(u->weight_len * ew);
    u->grad_shard = AlignedBuffer<float>(u->grad_len);
    u->master = AlignedBuffer<float>(u->optim_len);
    u->m = AlignedBuffer<float>(u->optim_len);
    u->v = AlignedBuffer<float>(u->optim_len);

    // Every rank draws the whole unit (the draw is deterministic) and keeps its slices.
    if (full.size() != u->padded) full = AlignedBuffer<float>(u->padded);
    full.fill_zero();
    init_unit(layout(), i, seed, full.data());
    std::memcpy(u->master.data(), full.data() + u->optim_offset, u->optim_len * sizeof(float));
    narrow(u->primary.data(), full.data() + u->weight_offset, u->weight_len, options_.weight_dtype);
    units_.push_back(std::move(u));
  }
}

ShardedEngine::~ShardedEngine() = default;

MeasuredMemory ShardedEngine::measured_memory() const {
  MeasuredMemory m;
  for (const auto& u : units_) {
    m.weights += u->primary.size();
    m.secondary += u->secondary.size();
    m.grads += u->grad_shard.size() * sizeof(float);
    m.optimizer += (u->master.size() + u->m.size() + u->v.size()) * sizeof(float);
  }
  m.scratch_peak = pool_.peak_bytes();
  return m;
}

std::uint64_t ShardedEngine::secondary_epoch(int unit) const {
  return units_.at(static_cast<std::size_t>(unit))->secondary_epoch;
}

std::span<const unsigned char> ShardedEngine::secondary_copy(int unit) const {
  const UnitState& u = *units_.at(static_cast<std::size_t>(unit));
  const std::string& name = layout().unit(static_cast<std::size_t>(unit)).name;
  STRATA_REQUIRE(u.secondary.size() != 0, "unit '{}' has no secondary copy under plan {}", name, options_.plan.name);
  STRATA_REQUIRE(u.secondary_epoch != 0, "the secondary copy of unit '{}' was never made", name);
  STRATA_REQUIRE(u.secondary_epoch == epoch_,
                 "the secondary copy of unit '{}' is stale: made at weight epoch {}, the weights are at epoch {}", name,
                 u.secondary_epoch, epoch_);
  return {u.secondary.data(), u.secondary.size()};
}

// ---- the executor -------------------------------------------------------------------------

void ShardedEngine::start_gather(UnitState& u, int unit, WeightSource source) {
  STRATA_REQUIRE(!u.gathered && !u.pending, "unit '{}' is gathered twice", layout().unit(static_cast<std::size_t>(unit)).name);
  const ShardPlan& plan = options_.plan;
  const DType wt = options_.weight_dtype;
  u.gathered = true;
  if (plan.weights == kReplicated) {
    if (wt == DType::kBF16) {
      u.compute = pool_.acquire(u.padded * sizeof(float), false);
      widen(reinterpret_cast<float*>(u.compute->data()), u.primary.data(), u.padded, wt);
    }
    return;
  }
  u.compute = pool_.acquire(u.padded * sizeof(float), false);
  void* target = u.compute->data();
  if (wt != DType::kF32) {
    u.staging = pool_.acquire(u.padded * dtype_size(wt), false);
    target = u.staging->data();
  }
  int last = plan.weights;
  if (source == WeightSource::kSecondary) {
    const std::span<const unsigned char> copy = secondary_copy(unit);  // refuses a stale copy
    std::memcpy(byte_at(target, u.secondary_offset, wt), copy.data(), copy.size());
    last = plan.secondary;
  } else {
    std::memcpy(byte_at(target, u.weight_offset, wt), u.primary.data(), u.primary.size());
  }
  u.pending = start_hierarchical_all_gather(comm_, target, u.padded, wt, 0, last);
}

void ShardedEngine::finish_gather(UnitState& u) {
  if (u.pending) {
    u.pending->wait();
    u.pending.reset();
    if (u.staging) widen(reinterpret_cast<float*>(u.compute->data()), u.staging->data(), u.padded, options_.weight_dtype);
  }
}

void ShardedEngine::keep_secondary(UnitState& u) {
  if (u.secondary.size() == 0) return;
  const void* from = u.staging ? static_cast<const void*>(u.staging->data()) : static_cast<const void*>(u.compute->data());
  std::memcpy(u.secondary.data(), static_cast<const unsigned char*>(from) + u.secondary_offset * dtype_size(options_.weight_dtype),
              u.secondary.size());
  u.secondary_epoch = epoch_;
}

void ShardedEngine::release(UnitState& u) {
  STRATA_REQUIRE(!u.pending, "a unit was released before its gather finished");
  pool_.release(std::move(u.compute));
  pool_.release(std::move(u.staging));
  u.gathered = false;
}

const float* ShardedEngine::weights(int unit) {
  UnitState& u = *units_.at(static_cast<std::size_t>(unit));
  STRATA_REQUIRE(u.gathered, "the schedule computes unit '{}' before gathering it",
                 layout().unit(static_cast<std::size_t>(unit)).name);
  finish_gather(u);
  if (u.compute) return reinterpret_cast<const float*>(u.compute->data());
  return reinterpret_cast<const float*>(u.primary.data());  // replicated fp32: compute in place
}

float* ShardedEngine::grad_target(int unit) {
  UnitState& u = *units_.at(static_cast<std::size_t>(unit));
  if (options_.plan.grads == kReplicated) return u.grad_shard.data();  // accumulate in place
  if (!u.grad) u.grad = pool_.acquire(u.padded * sizeof(float), true);
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
      STRATA_REQUIRE(!(comm_.rank() == fail_rank_ && steps_run_ == fail_step_ &&
                       op.layer == layout().config().n_layer - 1),
                     "injected failure (STRATA_INJECT_FAILURE={}:{}) in the backward of block {}", fail_rank_,
                     fail_step_, op.layer);
      gpt_.block_backward(op.layer, weights(op.unit), grad_target(op.unit));
      break;
    case ComputeStage::kEmbedding: gpt_.embedding_backward(grad_target(emb)); break;
    case ComputeStage::kNone: break;
  }
}

void ShardedEngine::reduce_scatter_grads(UnitState& u) {
  const int g = options_.plan.grads;
  if (g == kReplicated) return;
  const DType gt = options_.grad_dtype;
  float* full = reinterpret_cast<float*>(u.grad->data());
  ScratchPool::Buffer piece = pool_.acquire(u.grad_len * dtype_size(gt), false);
  if (gt == DType::kF32) {
    hierarchical_reduce_scatter(comm_, full, u.padded, gt, 0, g, piece->data());
    add_into(u.grad_shard.data(), reinterpret_cast<const float*>(piece->data()), u.grad_len);
  } else {
    ScratchPool::Buffer narrow_full = pool_.acquire(u.padded * dtype_size(gt), false);
    narrow(narrow_full->data(), full, u.padded, gt);
    hierarchical_reduce_scatter(comm_, narrow_full->data(), u.padded, gt, 0, g, piece->data());
    pool_.release(std::move(narrow_full));
    ScratchPool::Buffer wide = pool_.acquire(u.grad_len * sizeof(float), false);
    widen(reinterpret_cast<float*>(wide->data()), piece->data(), u.grad_len, gt);
    add_into(u.grad_shard.data(), reinterpret_cast<const float*>(wide->data()), u.grad_len);
    pool_.release(std::move(wide));
  }
  pool_.release(std::move(piece));
  pool_.release(std::move(u.grad));
}

void ShardedEngine::reduce_replicas(UnitState& u) {
  const ShardPlan& plan = options_.plan;
  const int top = comm_.topology().level_count() - 1;
  const bool scatter = plan.optimizer > plan.grads;
  const bool reduce = plan.optimizer < top;
  if (!scatter && !reduce) return;
  const DType gt = options_.grad_dtype;
  ScratchPool::Buffer work = pool_.acquire(u.grad_len * dtype_size(gt), false);
  narrow(work->data(), u.grad_shard.data(), u.grad_len, gt);
  ScratchPool::Buffer slice = pool_.acquire(u.optim_len * dtype_size(gt), false);
  if (scatter) {
    hierarchical_reduce_scatter(comm_, work->data(), u.grad_len, gt, plan.grads + 1, plan.optimizer, slice->data());
  } else {
    std::memcpy(slice->data(), work->data(), u.optim_len * dtype_size(gt));
  }
  if (reduce) hierarchical_all_reduce(comm_, slice->data(), u.optim_len, gt, plan.optimizer + 1, top);
  widen(u.grad_shard.data() + u.reduced_offset, slice->data(), u.optim_len, gt);
  pool_.release(std::move(slice));
  pool_.release(std::move(work));
}

void ShardedEngine::write_primary_from_master(UnitState& u) {
  const ShardPlan& plan = options_.plan;
  const Topology& t = comm_.topology();
  const DType wt = options_.weight_dtype;
  if (plan.optimizer > plan.weights) {
    const std::size_t at = shard_offset(t, comm_.rank(), u.weight_len, plan.weights + 1, plan.optimizer);
    narrow(byte_at(u.primary.data(), at, wt), u.master.data(), u.optim_len, wt);
    hierarchical_all_gather(comm_, u.primary.data(), u.weight_len, wt, plan.weights + 1, plan.optimizer);
  } else {
    const std::size_t at = shard_offset(t, comm_.rank(), u.optim_len, plan.optimizer + 1, plan.weights);
    narrow(u.primary.data(), u.master.data() + at, u.weight_len, wt);
  }
}

void ShardedEngine::execute(const ScheduleOp& op) {
  comm_.meter().set_phase(op.phase);
  UnitState* u = op.unit >= 0 ? units_.at(static_cast<std::size_t>(op.unit)).get() : nullptr;
  switch (op.kind) {
    case OpKind::kGatherStart: start_gather(*u, op.unit, op.source); break;
    case OpKind::kGatherWait: finish_gather(*u); break;
    case OpKind::kKeepSecondary: keep_secondary(*u); break;
    case OpKind::kRelease: release(*u); break;
    case OpKind::kForward:
    case OpKind::kBackward: compute(op); break;
    case OpKind::kReduceScatterGrads: reduce_scatter_grads(*u); break;
    case OpKind::kReduceReplicas: reduce_replicas(*u); break;
    case OpKind::kGradNorm: {
      const OpScope scope(Op::kGradNorm);
      double sum = 0.0;
      for (const auto& s : units_) sum += sum_of_squares(s->grad_shard.data() + s->reduced_offset, s->optim_len);
      comm_.all_reduce_control(&sum, 1, 0, options_.plan.optimizer);
      norm_ = std::sqrt(sum);
      break;
    }
    case OpKind::kOptimizerStep: {
      const OpScope scope(Op::kOptimizer);
      adamw_update_unit_slice(layout().unit(static_cast<std::size_t>(op.unit)), Range{u->optim_offset, u->optim_offset + u->optim_len},
                              u->master.data(), u->grad_shard.data() + u->reduced_offset, u->m.data(), u->v.data(),
                              hyper_, lr_, step_, clip_scale_);
      break;
    }
    case OpKind::kGatherUpdated: write_primary_from_master(*u); break;
    case OpKind::kBumpEpoch: ++epoch_; break;
  }
}

// ---- the TrainingEngine interface ----------------------------------------------------------

void ShardedEngine::zero_grad() {
  for (auto& u : units_) u->grad_shard.fill_zero();
  reduced_ = false;
}

float ShardedEngine::forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                                      float loss_scale) {
  tokens_ = inputs;
  targets_ = targets;
  // Every rank's loss is a mean over its rows; the global mean is their average, so each
  // rank's gradient carries 1 / world and the reductions are plain sums.
  loss_scale_ = loss_scale / static_cast<float>(comm_.world_size());
  reduced_ = false;
  for (const ScheduleOp& op : micro_ops_) execute(op);
  double loss = loss_;
  comm_.meter().set_phase(TrafficPhase::kMicroBatch);
  comm_.all_reduce_control(&loss, 1, 0, comm_.topology().level_count() - 1);
  comm_.meter().set_phase(TrafficPhase::kOther);
  return static_cast<float>(loss / comm_.world_size());
}

float ShardedEngine::evaluate(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  tokens_ = inputs;
  targets_ = targets;
  for (ScheduleOp op : eval_ops_) {
    op.phase = TrafficPhase::kOther;
    execute(op);
  }
  double loss = loss_;
  comm_.all_reduce_control(&loss, 1, 0, comm_.topology().level_count() - 1);
  comm_.meter().set_phase(TrafficPhase::kOther);
  return static_cast<float>(loss / comm_.world_size());
}

void ShardedEngine::finish_boundary_reduction() {
  if (reduced_) return;
  for (const ScheduleOp& op : reduce_ops_) execute(op);
  comm_.meter().set_phase(TrafficPhase::kOther);
  reduced_ = true;
}

double ShardedEngine::grad_norm() {
  finish_boundary_reduction();
  return norm_;
}

void ShardedEngine::optimizer_step(const AdamWHyper& hyper, double lr, int step, float grad_scale) {
  finish_boundary_reduction();
  hyper_ = hyper;
  lr_ = static_cast<float>(lr);
  step_ = step;
  clip_scale_ = grad_scale;
  for (const ScheduleOp& op : update_ops_) execute(op);
  comm_.meter().set_phase(TrafficPhase::kOther);
  reduced_ = false;
  ++steps_run_;
}

// ---- checkpoints ---------------------------------------------------------------------------

void ShardedEngine::gather_full(const AlignedBuffer<float>& slice, std::size_t offset, UnitState& u, float* full) {
  std::memcpy(full + offset, slice.data(), slice.size() * sizeof(float));
  hierarchical_all_gather(comm_, full, u.padded, DType::kF32, 0, options_.plan.optimizer);
}

std::vector<float> ShardedEngine::gather_master(int unit) {
  UnitState& u = *units_.at(static_cast<std::size_t>(unit));
  comm_.meter().set_phase(TrafficPhase::kOther);
  std::vector<float> full(u.padded);
  gather_full(u.master, u.optim_offset, u, full.data());
  full.resize(u.numel);
  return full;
}

void ShardedEngine::save_checkpoint(const std::string& path, int completed_steps) {
  comm_.meter().set_phase(TrafficPhase::kOther);
  const bool writer = comm_.rank() == 0;
  UnitBuffers params, m, v;
  if (writer) params = UnitBuffers(layout()), m = UnitBuffers(layout()), v = UnitBuffers(layout());
  for (std::size_t i = 0; i < units_.size(); ++i) {
    UnitState& u = *units_[i];
    AlignedBuffer<float> full(u.padded);
    const std::pair<const AlignedBuffer<float>*, UnitBuffers*> states[] = {{&u.master, &params}, {&u.m, &m}, {&u.v, &v}};
    for (const auto& [slice, into] : states) {
      gather_full(*slice, u.optim_offset, u, full.data());
      if (writer) std::memcpy(into->unit(i), full.data(), u.numel * sizeof(float));
    }
  }
  if (writer) strata::save_checkpoint(path, layout(), completed_steps, {params, m, v});
  comm_.barrier();
}

int ShardedEngine::load_checkpoint(const Checkpoint& checkpoint) {
  UnitBuffers params(layout()), m(layout()), v(layout());
  restore_checkpoint(checkpoint, layout(), {params, m, v});
  const int step = checkpoint.completed_steps;
  for (std::size_t i = 0; i < units_.size(); ++i) {
    UnitState& u = *units_[i];
    AlignedBuffer<float> full(u.padded);
    auto slice_of = [&](const UnitBuffers& from, AlignedBuffer<float>& into) {
      full.fill_zero();
      std::memcpy(full.data(), from.unit(i), u.numel * sizeof(float));
      std::memcpy(into.data(), full.data() + u.optim_offset, u.optim_len * sizeof(float));
    };
    slice_of(params, u.master);
    slice_of(m, u.m);
    slice_of(v, u.v);
    std::memcpy(full.data(), params.unit(i), u.numel * sizeof(float));
    narrow(u.primary.data(), full.data() + u.weight_offset, u.weight_len, options_.weight_dtype);
    u.grad_shard.fill_zero();
  }
  ++epoch_;  // every secondary copy predates the loaded weights
  return step;
}

}  // namespace strata
