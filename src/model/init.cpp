// Deterministic, parallel GPT-2 initialisation: each tensor is drawn in fixed-size chunks, each
// chunk from its own stream, so the result does not depend on the thread count.
#include "model/init.hpp"

#include <cmath>
#include <string_view>

#include "core/rng.hpp"

namespace strata {

namespace {

constexpr std::size_t kChunk = 1 << 16;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

void init_unit(const ModelLayout& layout, std::size_t unit_index, std::uint64_t seed, float* data) {
  const UnitLayout& unit = layout.unit(unit_index);
  const GptConfig& config = layout.config();
  for (std::size_t t = 0; t < unit.tensors.size(); ++t) {
    const TensorSpec& spec = unit.tensors[t];
    float* out = data + spec.range.begin;
    const std::size_t n = spec.range.size();
    if (spec.shape.size() == 1) {
      const float value = ends_with(spec.name, ".weight") ? 1.0f : 0.0f;  // norm gains 1, biases 0
      for (std::size_t i = 0; i < n; ++i) out[i] = value;
      continue;
    }
    double stddev = 0.02;
    if (ends_with(spec.name, "c_proj.weight")) stddev = 0.02 / std::sqrt(2.0 * config.n_layer);
    // Padded vocabulary rows are never looked up and their logits are masked: keep them zero.
    const std::size_t live = spec.name == "wte" ? static_cast<std::size_t>(config.vocab_size) * config.n_embd : n;
    const std::size_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
    for (std::size_t c = 0; c < chunks; ++c) {
      Rng rng = Rng::derive(seed, (unit_index << 40) ^ (t << 32) ^ c);
      const std::size_t end = std::min(n, (c + 1) * kChunk);
      for (std::size_t i = c * kChunk; i < end; ++i) {
        out[i] = i < live ? static_cast<float>(rng.normal() * stddev) : 0.0f;
      }
    }
  }
}

}  // namespace strata
