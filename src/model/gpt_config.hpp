// The shape of a GPT-2 model: named presets (tiny ... gpt2-1558m) or explicit sizes, validated.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

struct GptConfig {
  std::string name = "custom";
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int vocab_size = 0;
  int context_length = 0;
  // The token table is padded to a multiple of this (1 = no padding); padded logits are masked.
  int vocab_pad_multiple = 128;

  int padded_vocab_size() const {
    return (vocab_size + vocab_pad_multiple - 1) / vocab_pad_multiple * vocab_pad_multiple;
  }

  // Parameters of the unpadded model (what PyTorch or a paper would count).
  std::int64_t parameter_count() const;
  // Parameters as stored (padded token table).
  std::int64_t stored_parameter_count() const;
  // N in the FLOP formula: parameter_count() minus the position table (nanoGPT's convention:
  // the tied token table does work as the LM head, the position table only adds).
  std::int64_t matmul_parameter_count() const;
  // Training FLOPs per token at sequence length T: 6N + 12 L C T (nanoGPT's estimate_mfu /
  // PaLM appendix B; the attention term counts QK^T and AV without the causal halving).
  double flops_per_token(int seq_len) const;

  // Throws strata::Error with a sentence naming the first violated rule.
  void validate() const;

  // Layers, width, heads, vocabulary and context equal (the name and the padding may differ).
  bool same_shape(const GptConfig& other) const;
  // "L12 C768 heads 12 vocab 50257 context 1024", for messages.
  std::string shape_text() const;

  static GptConfig preset(std::string_view name);
  static std::vector<std::string> preset_names();
};

}  // namespace strata
