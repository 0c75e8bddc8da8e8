// The cached one-token forward.
#include "model/generator.hpp"

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/vector_math.hpp"
#include "model/cpu/elementwise.hpp"
#include "model/cpu/gelu.hpp"
#include "model/cpu/layernorm.hpp"
#include "model/cpu/matmul.hpp"

namespace strata {

Generator::Generator(const GptConfig& config, const UnitBuffers& params) : layout_(config), params_(params) {
  STRATA_REQUIRE(params.size() == layout_.unit_count(), "the generator needs all {} units of the model (got {})",
                 layout_.unit_count(), params.size());
  const std::size_t c = config.n_embd, t = config.context_length;
  for (int l = 0; l < config.n_layer; ++l) {
    keys_.emplace_back(t * c);
    values_.emplace_back(t * c);
  }
  x_ = AlignedBuffer<float>(c);
  ln_ = AlignedBuffer<float>(c);
  qkv_ = AlignedBuffer<float>(3 * c);
  att_ = AlignedBuffer<float>(c);
  proj_ = AlignedBuffer<float>(c);
  fch_ = AlignedBuffer<float>(4 * c);
  fch_gelu_ = AlignedBuffer<float>(4 * c);
  scores_ = AlignedBuffer<float>(t);
  logits_ = AlignedBuffer<float>(static_cast<std::size_t>(config.padded_vocab_size()));
  stats_ = AlignedBuffer<float>(2);
}

std::span<const float> Generator::append(std::int32_t token) {
  const GptConfig& config = layout_.config();
  STRATA_REQUIRE(token >= 0 && token < config.vocab_size, "token {} is outside the model's vocabulary of {}", token,
                 config.vocab_size);
  STRATA_REQUIRE(position_ < config.context_length, "the context is full: the model takes at most {} tokens",
                 config.context_length);
  const int c = config.n_embd, heads = config.n_head, hs = c / heads;
  const std::size_t pos = static_cast<std::size_t>(position_);
  const auto e = embedding_view(layout_.unit(ModelLayout::kEmbeddingUnit), params_.unit(ModelLayout::kEmbeddingUnit));
  cpu::add(x_.data(), e.wte + static_cast<std::size_t>(token) * c, e.wpe + pos * c, static_cast<std::size_t>(c));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int l = 0; l < config.n_layer; ++l) {
    const std::size_t u = layout_.block_unit(l);
    const auto w = block_view(layout_.unit(u), params_.unit(u));
    float* keys = keys_[static_cast<std::size_t>(l)].data();
    float* values = values_[static_cast<std::size_t>(l)].data();
    cpu::layernorm_forward(ln_.data(), stats_.data(), stats_.data() + 1, x_.data(), w.ln1_w, w.ln1_b, 1, c);
    cpu::matmul_forward(qkv_.data(), ln_.data(), w.qkv_w, w.qkv_b, 1, c, 3 * c);
    cpu::copy(keys + pos * c, qkv_.data() + c, static_cast<std::size_t>(c));
    cpu::copy(values + pos * c, qkv_.data() + 2 * c, static_cast<std::size_t>(c));
    for (int h = 0; h < heads; ++h) {
      const float* q = qkv_.data() + h * hs;
      float max = -std::numeric_limits<float>::infinity();
      for (std::size_t j = 0; j <= pos; ++j) {
        const float* k = keys + j * c + h * hs;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int i = 0; i < hs; ++i) dot += q[i] * k[i];
        scores_[j] = dot * scale;
        max = scores_[j] > max ? scores_[j] : max;
      }
      float sum = 0.0f;
      for (std::size_t j = 0; j <= pos; ++j) {
        scores_[j] = fast_exp(scores_[j] - max);
        sum += scores_[j];
      }
      float* out = att_.data() + h * hs;
      for (int i = 0; i < hs; ++i) out[i] = 0.0f;
      for (std::size_t j = 0; j <= pos; ++j) {
        const float p = scores_[j] / sum;
        const float* v = values + j * c + h * hs;
#pragma omp simd
        for (int i = 0; i < hs; ++i) out[i] += p * v[i];
      }
    }
    cpu::matmul_forward(proj_.data(), att_.data(), w.attn_proj_w, w.attn_proj_b, 1, c, c);
    cpu::add(x_.data(), x_.data(), proj_.data(), static_cast<std::size_t>(c));
    cpu::layernorm_forward(ln_.data(), stats_.data(), stats_.data() + 1, x_.data(), w.ln2_w, w.ln2_b, 1, c);
    cpu::matmul_forward(fch_.data(), ln_.data(), w.fc_w, w.fc_b, 1, c, 4 * c);
    cpu::gelu_forward(fch_gelu_.data(), fch_.data(), fch_.size());
    cpu::matmul_forward(proj_.data(), fch_gelu_.data(), w.fc_proj_w, w.fc_proj_b, 1, 4 * c, c);
    cpu::add(x_.data(), x_.data(), proj_.data(), static_cast<std::size_t>(c));
  }
  const std::size_t fu = layout_.final_norm_unit();
  const auto f = final_norm_view(layout_.unit(fu), params_.unit(fu));
  cpu::layernorm_forward(ln_.data(), stats_.data(), stats_.data() + 1, x_.data(), f.lnf_w, f.lnf_b, 1, c);
  cpu::matmul_forward(logits_.data(), ln_.data(), e.wte, nullptr, 1, c, config.padded_vocab_size());
  ++position_;
  return {logits_.data(), static_cast<std::size_t>(config.vocab_size)};
}

}  // namespace strata
