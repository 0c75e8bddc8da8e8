// The work of the sharding engine's local and blocking ops: the model's compute with the units
// the op names (their gathered weights, where their gradients go), the secondary copy, AdamW on
// this rank's slice, and the control reductions of the loss, the norm and the stop request.
#include <cmath>

#include "core/op_profile.hpp"
#include "engine/sharded_engine.hpp"
#include "engine/unit_collectives.hpp"
#include "optim/adamw.hpp"
#include "optim/grad_norm.hpp"

namespace strata {

const float* ShardedEngine::weights(int unit) {
  UnitShard& u = shard(unit);
  states_.at(static_cast<std::size_t>(unit)).require_gathered("compute");
  if (u.compute) return reinterpret_cast<const float*>(u.compute->data());
  return reinterpret_cast<const float*>(u.primary.data());  // replicated fp32: compute in place
}

const bf16* ShardedEngine::working_bf16(int unit) {
  return options_.bf16_working_copy ? shard(unit).working_bf16 : nullptr;
}

// Where a backward op writes the unit's gradient (schedule/op_effects says, once per schedule):
// its unit-gradient buffer, or the gradient shard in place.
float* ShardedEngine::gradient_target(int unit) {
  UnitShard& u = shard(unit);
  if (gradient_resource(schedule_) == Resource::kGradShard) return u.grad_shard.data();  // accumulate in place
  STRATA_CHECK(u.grad != nullptr, "the schedule writes the gradient of unit {} without allocating it", unit);
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
void ShardedEngine::compute(const ScheduleOp& op, const OpContext& x) {
  STRATA_CHECK(x.tokens.size() == gpt_.tokens_per_batch() && x.targets.size() == gpt_.tokens_per_batch(),
               "{} with {} tokens for a micro-batch of {}", op_kind_name(op.kind), x.tokens.size(), gpt_.tokens_per_batch());
  const auto w = [&](std::size_t i) {
    const int unit = nth_unit(op.weight_units, i, op, "weight");
    return UnitWeights(weights(unit), working_bf16(unit));
  };
  const auto g = [&](std::size_t i) {
    const int unit = nth_unit(op.grad_units, i, op, "gradient");
    return UnitGrad(gradient_target(unit),
                    writes_gradient_whole(schedule_, op, unit) ? GradWrite::kOverwrite : GradWrite::kAccumulate);
  };
  if (op.kind == OpKind::kForward) {
    switch (op.stage) {
      case ComputeStage::kEmbedding: gpt_.embedding_forward(w(0).f32, x.tokens); break;
      case ComputeStage::kBlock: gpt_.block_forward(op.layer, w(0)); break;
      case ComputeStage::kHead: break;  // returns the loss: see local()
      case ComputeStage::kNone: break;
    }
    return;
  }
  if (op.kind == OpKind::kRecompute) {
    STRATA_CHECK(op.stage == ComputeStage::kBlock, "a recompute of stage {}: only blocks recompute", static_cast<int>(op.stage));
    gpt_.block_recompute(op.layer, w(0));
    return;
  }
  switch (op.stage) {
    case ComputeStage::kHead: gpt_.head_backward(w(0).f32, w(1), g(0), g(1), x.loss_scale); break;
    case ComputeStage::kBlock: gpt_.block_backward(op.layer, w(0), g(0)); break;
    case ComputeStage::kEmbedding: gpt_.embedding_backward(g(0)); break;
    case ComputeStage::kNone: break;
  }
}

void ShardedEngine::local(const ScheduleOp& op, OpContext& x) {
  switch (op.kind) {
    case OpKind::kKeepSecondary: {
      // From the gathered fp32 copy, the values forward computed with (decoded ones under qwZ), so
      // backward computes with the same weights.
      UnitShard& u = shard(op.unit);
      STRATA_CHECK(u.secondary && u.compute, "keep_secondary of unit {} without a gathered copy", op.unit);
      narrow_to(u.secondary->data(), reinterpret_cast<const float*>(u.compute->data()) + u.secondary_offset,
                u.secondary_len, options_.weight_dtype);
      return;
    }
    case OpKind::kRelease: return;  // its free effect drops the copy (replicated fp32 weights compute in place)
    case OpKind::kForward:
      if (op.stage == ComputeStage::kHead) {
        compute(op, x);  // the token check
        const int embedding = nth_unit(op.weight_units, 1, op, "weight");
        x.local_loss = gpt_.head_forward(weights(nth_unit(op.weight_units, 0, op, "weight")),
                                               UnitWeights(weights(embedding), working_bf16(embedding)), x.targets);
        return;
      }
      compute(op, x);
      return;
    case OpKind::kBackward:
    case OpKind::kRecompute: compute(op, x); return;
    case OpKind::kOptimizerStep: {
      UnitShard& u = shard(op.unit);
      const OpScope scope(Op::kOptimizer, adamw_bytes_per_element(false) * static_cast<double>(u.optim_len));
      const UpdateOperands& up = update_;
      adamw_update_unit_slice(layout().unit(static_cast<std::size_t>(op.unit)),
                              Range{u.optim_offset, u.optim_offset + u.optim_len}, u.master.data(), u.reduced_grad(),
                              u.m.data(), u.v.data(), up.hyper, static_cast<float>(up.lr), up.step, up.grad_scale);
      return;
    }
    case OpKind::kInvalidateSecondaries: return;  // a change of state only (apply_op)
    default: STRATA_CHECK(false, "{} is not local work", op_kind_name(op.kind));
  }
}

void ShardedEngine::blocking(const ScheduleOp& op, OpContext& x) {
  switch (op.kind) {
    case OpKind::kLossReduce: {
      double loss = x.local_loss;
      if (!op.comm.empty()) {
        run_collective(op, [&] { comm_.all_reduce_control(&loss, 1, op.comm.first_level, op.comm.last_level); });
      }
      // Every rank's loss is a mean over its rows; the global mean is their average.
      x.loss = loss / comm_.world_size();
      return;
    }
    case OpKind::kGradNorm: {
      double elements = 0.0;
      for (const auto& s : units_) elements += static_cast<double>(s->optim_len);
      const OpScope scope(Op::kGradNorm, 4.0 * elements);
      double sum = 0.0;
      for (const auto& s : units_) sum += sum_of_squares(s->reduced_grad(), s->optim_len);
      if (!op.comm.empty()) {
        run_collective(op, [&] { comm_.all_reduce_control(&sum, 1, op.comm.first_level, op.comm.last_level); });
      }
      x.norm = std::sqrt(sum);
      return;
    }
    case OpKind::kAgreeStop: {
      double stop = x.stop_requested ? 1.0 : 0.0;
      if (!op.comm.empty()) {
        run_collective(op, [&] {
          comm_.all_reduce_control(&stop, 1, op.comm.first_level, op.comm.last_level, ControlOp::kMax);
        });
      }
      x.stop = stop != 0.0;
      return;
    }
    default: STRATA_CHECK(false, "{} is not a blocking collective", op_kind_name(op.kind));
  }
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

}  // namespace strata
