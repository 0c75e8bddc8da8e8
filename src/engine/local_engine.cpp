// Single-process training step.
#include "engine/local_engine.hpp"

#include <cmath>

#include "core/bf16.hpp"
#include "core/op_profile.hpp"
#include "model/cpu/gemm.hpp"
#include "model/init.hpp"
#include "engine/checkpoint_format.hpp"
#include "optim/grad_norm.hpp"

namespace strata {

LocalEngine::LocalEngine(const GptConfig& config, int batch, int seq_len, std::uint64_t seed,
                         ActivationCheckpointing checkpointing)
    : gpt_(config, batch, seq_len, checkpointing),
      params_(gpt_.layout()),
      grads_(gpt_.layout()),
      m_(gpt_.layout()),
      v_(gpt_.layout()) {
  for (std::size_t u = 0; u < layout().unit_count(); ++u) init_unit(layout(), u, seed, params_.unit(u));
}

float LocalEngine::forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                                    float loss_scale) {
  const auto working = working_bf16();
  const float loss = gpt_.forward(params_, inputs, targets, working);
  gpt_.backward(params_, grads_, loss_scale, working,
                grads_zero_pending_ ? GradWrite::kOverwrite : GradWrite::kAccumulate);
  grads_zero_pending_ = false;
  return loss;
}

UnitBuffers& LocalEngine::settled_grads() {
  if (grads_zero_pending_) {
    grads_.fill_zero();
    grads_zero_pending_ = false;
  }
  return grads_;
}

float LocalEngine::evaluate(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  return gpt_.forward(params_, inputs, targets, working_bf16());
}

std::span<const bf16* const> LocalEngine::working_bf16() {
  if (cpu::matmul_settings().dtype != cpu::ComputeDType::kBF16) return {};
  if (working_bf16_stale_) {
    const OpScope scope(Op::kWorkingCopy, 6.0 * static_cast<double>(layout().config().stored_parameter_count()));
    working_bf16_.resize(layout().unit_count());
    working_bf16_units_.resize(layout().unit_count());
    for (std::size_t u = 0; u < layout().unit_count(); ++u) {
      const std::size_t n = layout().unit(u).numel;
      if (working_bf16_[u].size() != n) working_bf16_[u] = AlignedBuffer<bf16>(n);
      fp32_to_bf16(working_bf16_[u].data(), params_.unit(u), n);
      working_bf16_units_[u] = working_bf16_[u].data();
    }
    working_bf16_stale_ = false;
  }
  return working_bf16_units_;
}

double LocalEngine::grad_norm() {
  const OpScope scope(Op::kGradNorm, 4.0 * static_cast<double>(layout().config().stored_parameter_count()));
  double total = 0.0;
  for (std::size_t u = 0; u < layout().unit_count(); ++u) {
    total += sum_of_squares(settled_grads().unit(u), layout().unit(u).numel);
  }
  return std::sqrt(total);
}

bool LocalEngine::optimizer_step(const UpdateOperands& update) {
  // A current bf16 working copy is kept current by the update itself.
  const bool keep_working = !working_bf16_stale_ && !working_bf16_.empty();
  const double elements = static_cast<double>(layout().config().stored_parameter_count());
  const OpScope scope(Op::kOptimizer, adamw_bytes_per_element(keep_working) * elements);
  for (std::size_t u = 0; u < layout().unit_count(); ++u) {
    const UnitLayout& unit = layout().unit(u);
    adamw_update_unit_slice(unit, Range{0, unit.numel}, params_.unit(u), settled_grads().unit(u), m_.unit(u), v_.unit(u),
                            update.hyper, static_cast<float>(update.lr), update.step, update.grad_scale,
                            keep_working ? working_bf16_[u].data() : nullptr);
  }
  working_bf16_stale_ = !keep_working;
  return update.stop_requested;  // the only rank
}

std::vector<CheckpointPiece> LocalEngine::checkpoint_pieces() {
  std::vector<CheckpointPiece> pieces;
  for (std::size_t u = 0; u < layout().unit_count(); ++u) {
    const std::size_t n = layout().unit(u).numel;
    const int unit = static_cast<int>(u);
    pieces.push_back({"master", unit, 0, n, params_.unit(u)});
    pieces.push_back({"adam_m", unit, 0, n, m_.unit(u)});
    pieces.push_back({"adam_v", unit, 0, n, v_.unit(u)});
  }
  return pieces;
}

void LocalEngine::load_state(const StateSource& reader) {
  for (std::size_t u = 0; u < layout().unit_count(); ++u) {
    const std::size_t n = layout().unit(u).numel;
    const int unit = static_cast<int>(u);
    reader.read("master", unit, 0, n, params_.unit(u));
    reader.read("adam_m", unit, 0, n, m_.unit(u));
    reader.read("adam_v", unit, 0, n, v_.unit(u));
  }
  working_bf16_stale_ = true;
}

UnitBuffers LocalEngine::whole_weights() {
  UnitBuffers copy(layout());
  for (std::size_t u = 0; u < layout().unit_count(); ++u) {
    std::copy(params_.unit(u), params_.unit(u) + layout().unit(u).numel, copy.unit(u));
  }
  return copy;
}

CheckpointRun LocalEngine::checkpoint_run() const {
  CheckpointRun run;
  run.engine = "single-process";
  run.world = 1;
  run.batch_size = gpt_.batch();
  run.seq_len = gpt_.seq_len();
  return run;
}

MemoryPrediction LocalEngine::predicted_memory(std::uint64_t fixed) const {
  return predict_reference_memory(layout().config(), gpt_.batch(), gpt_.seq_len(), gpt_.checkpointing(),
                                  cpu::matmul_settings().dtype == cpu::ComputeDType::kBF16, fixed);
}

std::uint64_t LocalEngine::allocated_peak_bytes() const {
  std::uint64_t bytes = gpt_.allocated_activation_bytes();
  for (const UnitBuffers* b : {&params_, &grads_, &m_, &v_}) {
    for (std::size_t u = 0; u < b->size(); ++u) bytes += b->buffer(u).size() * sizeof(float);
  }
  for (const AlignedBuffer<bf16>& w : working_bf16_) bytes += w.size() * sizeof(bf16);
  return bytes;
}

}  // namespace strata
