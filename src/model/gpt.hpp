// The GPT-2 forward and backward pass on CPU, as one explicit function per unit so an engine can
// materialise a unit's weights just before its step and release them just after. The object owns
// the activations of one micro-batch of fixed shape (batch, seq_len).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/bf16.hpp"
#include "model/activation_checkpointing.hpp"
#include "model/cpu/grad_write.hpp"
#include "model/gpt_config.hpp"
#include "model/parameter_layout.hpp"
#include "model/unit_buffers.hpp"

namespace strata {

// Bytes of the activations and scratch a Gpt of one shape holds (fp32), in closed form: what a
// simulator charges for a model it cannot allocate. per_layer is one block's stored activations
// (its output, the next block's input, included); rest is the embedding output, the head (logits
// included) and the scratch shared by the blocks.
struct ActivationBytes {
  std::uint64_t per_layer = 0;
  std::uint64_t rest = 0;
  std::uint64_t layer_input = 0;  // one block's input: all a recomputed block keeps
  std::uint64_t total(int n_layer) const { return per_layer * static_cast<std::uint64_t>(n_layer) + rest; }
  // With recomputation: every block keeps its output; the blocks that keep their activations keep
  // the rest of them, and the recomputed ones share one set, which each backward refills.
  std::uint64_t total(int n_layer, const ActivationCheckpointing& c) const {
    const auto recomputed = static_cast<std::uint64_t>(c.recomputed_blocks(n_layer));
    const std::uint64_t kept = static_cast<std::uint64_t>(n_layer) - recomputed;
    const std::uint64_t internals = per_layer - layer_input;
    return layer_input * static_cast<std::uint64_t>(n_layer) + internals * (kept + (recomputed > 0 ? 1 : 0)) + rest;
  }
};

// A unit's weights as the matrix products read them: the fp32 buffer, and where the engine holds
// one, its bf16 working copy (to_bf16 of each element), which --compute-dtype bf16 reads instead
// of converting the weights for every product. Converts from a bare fp32 pointer.
struct UnitWeights {
  UnitWeights(const float* f32_values) : f32(f32_values) {}  // NOLINT(google-explicit-constructor)
  UnitWeights(const float* f32_values, const bf16* bf16_values) : f32(f32_values), bf16_copy(bf16_values) {}
  const float* f32;
  const bf16* bf16_copy = nullptr;
};

// Where a backward writes a unit's gradient, and whether it adds to the buffer or writes it whole
// (the first write after the engine opened the buffer: nothing has to zero it first). Converts
// from a bare pointer as an accumulation.
struct UnitGrad {
  UnitGrad(float* grad_values) : values(grad_values) {}  // NOLINT(google-explicit-constructor)
  UnitGrad(float* grad_values, GradWrite how) : values(grad_values), write(how) {}
  float* values;
  GradWrite write = GradWrite::kAccumulate;
};

class Gpt {
 public:
  static ActivationBytes activation_bytes(const GptConfig& config, int batch, int seq_len);
  // What this object allocated (its activations and scratch, tokens excluded).
  std::uint64_t allocated_activation_bytes() const;

  // `checkpointing` names the blocks whose activations are not kept: their backward must follow a
  // block_recompute (the whole-model backward below does that itself).
  Gpt(const GptConfig& config, int batch, int seq_len, ActivationCheckpointing checkpointing = {});

  const GptConfig& config() const { return layout_.config(); }
  const ModelLayout& layout() const { return layout_; }
  int batch() const { return batch_; }
  int seq_len() const { return seq_len_; }
  const ActivationCheckpointing& checkpointing() const { return checkpointing_; }
  std::size_t tokens_per_batch() const { return static_cast<std::size_t>(batch_) * seq_len_; }

  // Forward, in order: embedding, blocks 0..L-1, head. Pointers are a unit's full flat buffer.
  void embedding_forward(const float* embedding_unit, std::span<const std::int32_t> tokens);
  void block_forward(int layer, UnitWeights block_unit);
  // A recomputed block's forward again, from its kept input, refilling the activations its
  // backward reads (the same kernels on the same inputs: the same bits as the first forward).
  void block_recompute(int layer, UnitWeights block_unit);
  // Final norm, tied LM head and cross-entropy; returns the mean loss over the batch.
  float head_forward(const float* final_norm_unit, UnitWeights embedding_unit, std::span<const std::int32_t> targets);

  // Backward, in reverse order: head, blocks L-1..0, embedding. Gradients are added into the grad
  // buffers, or written whole where the UnitGrad says so; the loss gradient is
  // loss_scale * d(mean loss) (1 / grad_accum for accumulation). The tied token table receives the
  // head's gradient here and the lookup's in embedding_backward: one gradient buffer, no copy, so
  // the head is the one that writes the embedding unit whole (its position rows zeroed) and the
  // lookup adds.
  void head_backward(const float* final_norm_unit, UnitWeights embedding_unit, UnitGrad final_norm_grad,
                     UnitGrad embedding_grad, float loss_scale);
  void block_backward(int layer, UnitWeights block_unit, UnitGrad block_grad);
  // Needs no weights: the lookup's gradient only depends on the tokens. An overwrite zeroes the
  // unit first (a scatter cannot write it whole); the engines never ask for one.
  void embedding_backward(UnitGrad embedding_grad);

  // The whole model held in one process; params_bf16, where not empty, holds each unit's bf16
  // working copy.
  float forward(const UnitBuffers& params, std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                std::span<const bf16* const> params_bf16 = {});
  void backward(const UnitBuffers& params, UnitBuffers& grads, float loss_scale,
                std::span<const bf16* const> params_bf16 = {}, GradWrite write = GradWrite::kAccumulate);

  // Valid between head_forward and head_backward: (batch * seq_len, padded_vocab) logits.
  const float* logits() const { return logits_.data(); }

 private:
  // What a block's backward reads besides its input; its output (the next block's input) is kept
  // apart, since every block keeps that.
  struct BlockActivations {
    AlignedBuffer<float> ln1, ln1_mean, ln1_rstd, qkv, atty, lse, residual2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu;
    void allocate(std::size_t tokens, std::size_t channels, std::size_t attention_rows);
    std::uint64_t floats() const;
  };

  const float* layer_input(int layer) const;
  BlockActivations& activations(int layer);
  void run_block_forward(int layer, UnitWeights block_unit, bool write_output);

  ModelLayout layout_;
  int batch_;
  int seq_len_;
  std::vector<std::int32_t> tokens_;
  std::vector<std::int32_t> targets_;
  AlignedBuffer<float> encoded_;
  ActivationCheckpointing checkpointing_;
  std::vector<BlockActivations> layers_;  // empty for the recomputed blocks
  BlockActivations recomputed_;           // shared by the recomputed blocks (empty without any)
  std::vector<AlignedBuffer<float>> outputs_;
  AlignedBuffer<float> lnf_, lnf_mean_, lnf_rstd_, logits_, lse_, losses_;
  // Scratch shared by all layers.
  AlignedBuffer<float> proj_, dresidual_, dln_, datty_, dqkv_, dfch_;
};

}  // namespace strata
