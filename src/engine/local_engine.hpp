// The plain single-process reference: the whole model, its gradients and AdamW state in one
// process, no sharding. Sharded engines are checked against it.
#pragma once

#include <cstdint>
#include <span>

#include "model/gpt.hpp"
#include "model/unit_buffers.hpp"
#include "optim/adamw.hpp"
#include "engine/training_engine.hpp"

namespace strata {

class LocalEngine final : public TrainingEngine {
 public:
  LocalEngine(const GptConfig& config, int batch, int seq_len, std::uint64_t seed,
              ActivationCheckpointing checkpointing = {});

  const ModelLayout& layout() const { return gpt_.layout(); }
  Gpt& gpt() { return gpt_; }
  // Writable access may change the weights: the bf16 working copy is remade before it is next used.
  UnitBuffers& params() {
    working_bf16_stale_ = true;
    return params_;
  }
  UnitBuffers& grads() { return settled_grads(); }
  UnitBuffers& adam_m() { return m_; }
  UnitBuffers& adam_v() { return v_; }

  // The next backward writes the gradients whole instead of adding to them: no pass zeroes them.
  void zero_grad() override { grads_zero_pending_ = true; }
  // Forward and backward of one micro-batch; gradients accumulate, scaled by loss_scale.
  float forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                         float loss_scale) override;
  float evaluate(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) override;
  double grad_norm() override;
  bool optimizer_step(const UpdateOperands& update) override;
  std::vector<CheckpointPiece> checkpoint_pieces() override;
  void load_state(const StateSource& reader) override;
  CheckpointRun checkpoint_run() const override;
  UnitBuffers whole_weights() override;
  MemoryPrediction predicted_memory(std::uint64_t fixed) const override;
  std::uint64_t allocated_peak_bytes() const override;
  std::string description() const override {
    return gpt_.checkpointing().enabled()
               ? "single-process reference | activation checkpointing " +
                     activation_checkpointing_name(gpt_.checkpointing())
               : "single-process reference";
  }

 private:
  // Each unit's bf16 working copy under --compute-dtype bf16 (empty otherwise), remade from the
  // fp32 weights once after they change, so the products of every micro-batch read it unconverted.
  std::span<const bf16* const> working_bf16();

  // The gradients, zeroed now if zero_grad was called and no backward has written them since.
  UnitBuffers& settled_grads();

  Gpt gpt_;
  UnitBuffers params_, grads_, m_, v_;
  std::vector<AlignedBuffer<bf16>> working_bf16_;
  std::vector<const bf16*> working_bf16_units_;
  bool working_bf16_stale_ = true;
  bool grads_zero_pending_ = false;
};

}  // namespace strata
