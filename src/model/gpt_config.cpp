// GPT-2 presets and the rules a model shape must satisfy.
#include "model/gpt_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"

namespace strata {

namespace {

struct Preset {
  const char* name;
  int n_layer, n_embd, n_head, vocab_size, context_length;
};

// tiny: the test model; small: the benchmark's small config; then GPT-2 (Radford et al.); then
// GPT-3-style shapes at T=2048 (Brown et al. table 2.1, with GPT-2's vocabulary) up to the
// 20B-class shape of GPT-NeoX-20B, for simulation and planning: this machine cannot train them.
constexpr Preset kPresets[] = {
    {"tiny", 2, 64, 4, 256, 64},
    {"small", 4, 256, 4, 8192, 128},
    {"gpt2-124m", 12, 768, 12, 50257, 1024},
    {"gpt2-350m", 24, 1024, 16, 50257, 1024},
    {"gpt2-774m", 36, 1280, 20, 50257, 1024},
    {"gpt2-1558m", 48, 1600, 25, 50257, 1024},
    {"gpt-1.3b", 24, 2048, 16, 50257, 2048},
    {"gpt-6.7b", 32, 4096, 32, 50257, 2048},
    {"gpt-13b", 40, 5120, 40, 50257, 2048},
    {"gpt-20b", 44, 6144, 64, 50257, 2048},
};

std::int64_t block_parameter_count(std::int64_t c) {
  // ln_1, c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj
  return 2 * c + (3 * c * c + 3 * c) + (c * c + c) + 2 * c + (4 * c * c + 4 * c) + (4 * c * c + c);
}

}  // namespace

std::int64_t GptConfig::parameter_count() const {
  const std::int64_t c = n_embd;
  return static_cast<std::int64_t>(vocab_size) * c + static_cast<std::int64_t>(context_length) * c +
         n_layer * block_parameter_count(c) + 2 * c;
}

std::int64_t GptConfig::stored_parameter_count() const {
  return parameter_count() + static_cast<std::int64_t>(padded_vocab_size() - vocab_size) * n_embd;
}

std::int64_t GptConfig::matmul_parameter_count() const {
  return parameter_count() - static_cast<std::int64_t>(context_length) * n_embd;
}

double GptConfig::flops_per_token(int seq_len) const {
  return 6.0 * static_cast<double>(matmul_parameter_count()) +
         12.0 * n_layer * static_cast<double>(n_embd) * seq_len;
}

bool GptConfig::same_shape(const GptConfig& o) const {
  return n_layer == o.n_layer && n_embd == o.n_embd && n_head == o.n_head && vocab_size == o.vocab_size &&
         context_length == o.context_length;
}

std::string GptConfig::shape_text() const {
  return fmt::format("L{} C{} heads {} vocab {} context {}", n_layer, n_embd, n_head, vocab_size, context_length);
}

void GptConfig::validate() const {
  // The upper bounds keep every count of the model inside 64 bits (and far above any model a
  // cluster of today could hold).
  STRATA_REQUIRE(n_layer >= 1 && n_layer <= (1 << 16), "model '{}': n_layer must be between 1 and 65536 (got {})", name,
                 n_layer);
  STRATA_REQUIRE(n_embd >= 1 && n_embd <= (1 << 17), "model '{}': n_embd must be between 1 and 131072 (got {})", name,
                 n_embd);
  STRATA_REQUIRE(n_head >= 1, "model '{}': n_head must be at least 1 (got {})", name, n_head);
  STRATA_REQUIRE(n_embd % n_head == 0, "model '{}': n_embd ({}) must be a multiple of n_head ({})", name,
                 n_embd, n_head);
  STRATA_REQUIRE(vocab_size >= 2 && vocab_size <= (1 << 30), "model '{}': vocab_size must be between 2 and 2^30 (got {})",
                 name, vocab_size);
  STRATA_REQUIRE(context_length >= 1, "model '{}': context_length must be at least 1 (got {})", name,
                 context_length);
  STRATA_REQUIRE(vocab_pad_multiple >= 1 && vocab_pad_multiple <= (1 << 20),
                 "model '{}': vocab_pad_multiple must be between 1 and 2^20 (got {})", name,
                 vocab_pad_multiple);
  STRATA_REQUIRE(static_cast<std::int64_t>(padded_vocab_size()) * n_embd < (1LL << 31),
                 "model '{}': the token table ({} x {}) exceeds 2^31 elements", name, padded_vocab_size(), n_embd);
  STRATA_REQUIRE(static_cast<std::int64_t>(context_length) * n_embd < (1LL << 31),
                 "model '{}': the position table ({} x {}) exceeds 2^31 elements", name, context_length, n_embd);
}

GptConfig GptConfig::preset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) {
      GptConfig c;
      c.name = p.name;
      c.n_layer = p.n_layer;
      c.n_embd = p.n_embd;
      c.n_head = p.n_head;
      c.vocab_size = p.vocab_size;
      c.context_length = p.context_length;
      return c;
    }
  }
  fail("unknown model '{}'; known models: {}", name, fmt::join(preset_names(), ", "));
}

std::vector<std::string> GptConfig::preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

}  // namespace strata
