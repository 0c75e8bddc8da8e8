// Where every parameter lives: the model is a list of units (token/position embeddings, each
// transformer block, the final norm), each one flat buffer of named tensors at fixed ranges, so
// an engine can shard, gather and update a unit as a range of numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/range.hpp"
#include "model/gpt_config.hpp"

namespace strata {

enum class UnitKind { kEmbedding, kBlock, kFinalNorm };

struct TensorSpec {
  std::string name;                 // PyTorch-style name, e.g. "h3.attn.c_attn.weight"
  Range range;                      // element range inside the unit's flat buffer
  std::vector<std::int64_t> shape;  // Linear weights are (out, in) as in torch.nn.Linear
  bool weight_decay = false;        // AdamW decays matrices and embeddings, not biases or norms
};

struct UnitLayout {
  std::string name;
  UnitKind kind = UnitKind::kBlock;
  int layer = -1;  // block index for kBlock, -1 otherwise
  std::vector<TensorSpec> tensors;
  std::size_t numel = 0;

  const TensorSpec& tensor(const std::string& name) const;
};

class ModelLayout {
 public:
  explicit ModelLayout(const GptConfig& config);

  const GptConfig& config() const { return config_; }
  const std::vector<UnitLayout>& units() const { return units_; }
  const UnitLayout& unit(std::size_t i) const { return units_.at(i); }
  std::size_t unit_count() const { return units_.size(); }

  static constexpr std::size_t kEmbeddingUnit = 0;
  std::size_t block_unit(int layer) const { return 1 + static_cast<std::size_t>(layer); }
  std::size_t final_norm_unit() const { return units_.size() - 1; }

 private:
  GptConfig config_;
  std::vector<UnitLayout> units_;
};

// Typed pointers into a unit's flat buffer; P is float* or const float*. Field order matches the
// tensor order of the layout, so a view is built by walking the specs.
template <class P>
struct EmbeddingView {
  P wte;  // (padded_vocab, C); rows >= vocab_size stay zero
  P wpe;  // (context_length, C)
};

template <class P>
struct BlockView {
  P ln1_w, ln1_b;
  P qkv_w, qkv_b;              // (3C, C), (3C)
  P attn_proj_w, attn_proj_b;  // (C, C), (C)
  P ln2_w, ln2_b;
  P fc_w, fc_b;                // (4C, C), (4C)
  P fc_proj_w, fc_proj_b;      // (C, 4C), (C)
};

template <class P>
struct FinalNormView {
  P lnf_w, lnf_b;
};

template <class P>
EmbeddingView<P> embedding_view(const UnitLayout& u, P base) {
  return {base + u.tensors[0].range.begin, base + u.tensors[1].range.begin};
}

template <class P>
BlockView<P> block_view(const UnitLayout& u, P base) {
  auto at = [&](int i) { return base + u.tensors[static_cast<std::size_t>(i)].range.begin; };
  return {at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8), at(9), at(10), at(11)};
}

template <class P>
FinalNormView<P> final_norm_view(const UnitLayout& u, P base) {
  return {base + u.tensors[0].range.begin, base + u.tensors[1].range.begin};
}

}  // namespace strata
