// Builds the unit layout of a GPT-2 model: tensor order, shapes and weight-decay flags.
#include "model/parameter_layout.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace strata {

namespace {

class UnitBuilder {
 public:
  UnitBuilder(std::string name, UnitKind kind, int layer) {
    unit_.name = std::move(name);
    unit_.kind = kind;
    unit_.layer = layer;
  }
  void add(std::string name, std::vector<std::int64_t> shape) {
    std::size_t n = 1;
    for (auto d : shape) n *= static_cast<std::size_t>(d);
    const bool decay = shape.size() >= 2;
    unit_.tensors.push_back({std::move(name), Range{unit_.numel, unit_.numel + n}, std::move(shape), decay});
    unit_.numel += n;
  }
  UnitLayout take() { return std::move(unit_); }

 private:
  UnitLayout unit_;
};

}  // namespace

const TensorSpec& UnitLayout::tensor(const std::string& tensor_name) const {
  for (const auto& t : tensors) {
    if (t.name == tensor_name) return t;
  }
  fail("unit '{}' has no tensor '{}'", name, tensor_name);
}

ModelLayout::ModelLayout(const GptConfig& config) : config_(config) {
  config_.validate();
  const std::int64_t c = config.n_embd;

  UnitBuilder embedding("embedding", UnitKind::kEmbedding, -1);
  embedding.add("wte", {config.padded_vocab_size(), c});
  embedding.add("wpe", {config.context_length, c});
  units_.push_back(embedding.take());

  for (int l = 0; l < config.n_layer; ++l) {
    UnitBuilder block(fmt::format("block{}", l), UnitKind::kBlock, l);
    const std::string p = fmt::format("h{}.", l);
    block.add(p + "ln_1.weight", {c});
    block.add(p + "ln_1.bias", {c});
    block.add(p + "attn.c_attn.weight", {3 * c, c});
    block.add(p + "attn.c_attn.bias", {3 * c});
    block.add(p + "attn.c_proj.weight", {c, c});
    block.add(p + "attn.c_proj.bias", {c});
    block.add(p + "ln_2.weight", {c});
    block.add(p + "ln_2.bias", {c});
    block.add(p + "mlp.c_fc.weight", {4 * c, c});
    block.add(p + "mlp.c_fc.bias", {4 * c});
    block.add(p + "mlp.c_proj.weight", {c, 4 * c});
    block.add(p + "mlp.c_proj.bias", {c});
    units_.push_back(block.take());
  }

  UnitBuilder final_norm("final_norm", UnitKind::kFinalNorm, -1);
  final_norm.add("ln_f.weight", {c});
  final_norm.add("ln_f.bias", {c});
  units_.push_back(final_norm.take());
}

}  // namespace strata
