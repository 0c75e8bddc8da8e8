// GPT-2 forward/backward orchestration over the CPU kernels.
#include "model/gpt.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/cpu/flash_attention.hpp"
#include "model/cpu/elementwise.hpp"
#include "model/cpu/embedding.hpp"
#include "model/cpu/gelu.hpp"
#include "model/cpu/layernorm.hpp"
#include "model/cpu/matmul.hpp"
#include "model/cpu/softmax_cross_entropy.hpp"

namespace strata {

namespace {

// A view of a unit's bf16 copy, all null where there is none (no arithmetic on a null base).
template <class View, class Make>
View bf16_view(const UnitLayout& unit, const bf16* base, Make make) {
  return base == nullptr ? View{} : make(unit, base);
}

BlockView<const bf16*> block_bf16(const UnitLayout& unit, const bf16* base) {
  return bf16_view<BlockView<const bf16*>>(unit, base, block_view<const bf16*>);
}

EmbeddingView<const bf16*> embedding_bf16(const UnitLayout& unit, const bf16* base) {
  return bf16_view<EmbeddingView<const bf16*>>(unit, base, embedding_view<const bf16*>);
}

const bf16* unit_bf16(std::span<const bf16* const> units, std::size_t u) { return units.empty() ? nullptr : units[u]; }

}  // namespace

ActivationBytes Gpt::activation_bytes(const GptConfig& config, int batch, int seq_len) {
  const std::uint64_t bt = static_cast<std::uint64_t>(batch) * static_cast<std::uint64_t>(seq_len);
  const std::uint64_t c = static_cast<std::uint64_t>(config.n_embd);
  const std::uint64_t f = sizeof(float);
  ActivationBytes a;
  // ln1, atty, residual2, ln2, output (C each), qkv (3C), fch and fch_gelu (4C each), four
  // norm statistics, and the attention's log-sum-exp (one per head and token).
  a.per_layer = f * (bt * c * (5 + 3 + 8) + 4 * bt + bt * static_cast<std::uint64_t>(config.n_head));
  // encoded, lnf, proj, dresidual, dln, datty (C each), dqkv (3C), dfch (4C), lnf statistics,
  // lse and losses, and the logits.
  a.rest = f * (bt * c * (6 + 3 + 4) + 4 * bt + bt * static_cast<std::uint64_t>(config.padded_vocab_size()));
  a.layer_input = f * bt * c;
  return a;
}

void Gpt::BlockActivations::allocate(std::size_t tokens, std::size_t channels, std::size_t attention_rows) {
  ln1 = AlignedBuffer<float>(tokens * channels);
  ln1_mean = AlignedBuffer<float>(tokens);
  ln1_rstd = AlignedBuffer<float>(tokens);
  qkv = AlignedBuffer<float>(tokens * 3 * channels);
  atty = AlignedBuffer<float>(tokens * channels);
  lse = AlignedBuffer<float>(attention_rows);
  residual2 = AlignedBuffer<float>(tokens * channels);
  ln2 = AlignedBuffer<float>(tokens * channels);
  ln2_mean = AlignedBuffer<float>(tokens);
  ln2_rstd = AlignedBuffer<float>(tokens);
  fch = AlignedBuffer<float>(tokens * 4 * channels);
  fch_gelu = AlignedBuffer<float>(tokens * 4 * channels);
}

std::uint64_t Gpt::BlockActivations::floats() const {
  std::uint64_t n = 0;
  for (const AlignedBuffer<float>* b :
       {&ln1, &ln1_mean, &ln1_rstd, &qkv, &atty, &lse, &residual2, &ln2, &ln2_mean, &ln2_rstd, &fch, &fch_gelu}) {
    n += b->size();
  }
  return n;
}

std::uint64_t Gpt::allocated_activation_bytes() const {
  std::uint64_t n = recomputed_.floats();
  for (const BlockActivations& a : layers_) n += a.floats();
  for (const AlignedBuffer<float>& o : outputs_) n += o.size();
  for (const AlignedBuffer<float>* b : {&encoded_, &lnf_, &lnf_mean_, &lnf_rstd_, &logits_, &lse_, &losses_, &proj_,
                                        &dresidual_, &dln_, &datty_, &dqkv_, &dfch_}) {
    n += b->size();
  }
  return n * sizeof(float);
}

Gpt::Gpt(const GptConfig& config, int batch, int seq_len, ActivationCheckpointing checkpointing)
    : layout_(config), batch_(batch), seq_len_(seq_len), checkpointing_(checkpointing) {
  STRATA_REQUIRE(batch >= 1, "batch size must be at least 1 (got {})", batch);
  STRATA_REQUIRE(seq_len >= 1 && seq_len <= config.context_length,
                 "sequence length {} must be between 1 and the model's context length {}", seq_len,
                 config.context_length);
  const std::size_t bt = tokens_per_batch();
  const std::size_t c = config.n_embd;
  const std::size_t attention_rows = static_cast<std::size_t>(batch) * config.n_head * seq_len;
  tokens_.resize(bt);
  targets_.resize(bt);
  encoded_ = AlignedBuffer<float>(bt * c);
  layers_.resize(config.n_layer);
  outputs_.resize(config.n_layer);
  for (int l = 0; l < config.n_layer; ++l) {
    if (!checkpointing_.recomputes(l)) layers_[static_cast<std::size_t>(l)].allocate(bt, c, attention_rows);
    outputs_[static_cast<std::size_t>(l)] = AlignedBuffer<float>(bt * c);
  }
  if (checkpointing_.recomputed_blocks(config.n_layer) > 0) recomputed_.allocate(bt, c, attention_rows);
  lnf_ = AlignedBuffer<float>(bt * c);
  lnf_mean_ = AlignedBuffer<float>(bt);
  lnf_rstd_ = AlignedBuffer<float>(bt);
  logits_ = AlignedBuffer<float>(bt * static_cast<std::size_t>(config.padded_vocab_size()));
  lse_ = AlignedBuffer<float>(bt);
  losses_ = AlignedBuffer<float>(bt);
  proj_ = AlignedBuffer<float>(bt * c);
  dresidual_ = AlignedBuffer<float>(bt * c);
  dln_ = AlignedBuffer<float>(bt * c);
  datty_ = AlignedBuffer<float>(bt * c);
  dqkv_ = AlignedBuffer<float>(bt * 3 * c);
  dfch_ = AlignedBuffer<float>(bt * 4 * c);
}

const float* Gpt::layer_input(int layer) const {
  return layer == 0 ? encoded_.data() : outputs_[static_cast<std::size_t>(layer - 1)].data();
}

Gpt::BlockActivations& Gpt::activations(int layer) {
  return checkpointing_.recomputes(layer) ? recomputed_ : layers_[static_cast<std::size_t>(layer)];
}

void Gpt::embedding_forward(const float* embedding_unit, std::span<const std::int32_t> tokens) {
  STRATA_REQUIRE(tokens.size() == tokens_.size(), "expected {} input tokens, got {}", tokens_.size(),
                 tokens.size());
  std::copy(tokens.begin(), tokens.end(), tokens_.begin());
  const auto e = embedding_view(layout_.unit(ModelLayout::kEmbeddingUnit), embedding_unit);
  cpu::embedding_forward(encoded_.data(), tokens_.data(), e.wte, e.wpe, batch_, seq_len_, config().n_embd);
}

void Gpt::block_forward(int layer, UnitWeights block_unit) { run_block_forward(layer, block_unit, true); }

void Gpt::block_recompute(int layer, UnitWeights block_unit) {
  STRATA_CHECK(checkpointing_.recomputes(layer), "block {} keeps its activations: nothing to recompute", layer);
  run_block_forward(layer, block_unit, false);  // the output is kept, and the next block's backward is done
}

void Gpt::run_block_forward(int layer, UnitWeights block_unit, bool write_output) {
  const int bt = static_cast<int>(tokens_per_batch());
  const int c = config().n_embd;
  const auto& unit = layout_.unit(layout_.block_unit(layer));
  const auto w = block_view(unit, block_unit.f32);
  const auto w16 = block_bf16(unit, block_unit.bf16_copy);
  BlockActivations& a = activations(layer);
  const float* x = layer_input(layer);

  cpu::layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, w.ln1_w, w.ln1_b, bt, c);
  cpu::matmul_forward(a.qkv.data(), a.ln1.data(), w.qkv_w, w.qkv_b, bt, c, 3 * c, w16.qkv_w);
  cpu::flash_attention_forward(a.atty.data(), a.lse.data(), a.qkv.data(), batch_, seq_len_, c, config().n_head);
  cpu::matmul_forward(proj_.data(), a.atty.data(), w.attn_proj_w, w.attn_proj_b, bt, c, c, w16.attn_proj_w);
  cpu::add(a.residual2.data(), x, proj_.data(), a.residual2.size());
  cpu::layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.residual2.data(), w.ln2_w,
                         w.ln2_b, bt, c);
  cpu::matmul_forward(a.fch.data(), a.ln2.data(), w.fc_w, w.fc_b, bt, c, 4 * c, w16.fc_w);
  cpu::gelu_forward(a.fch_gelu.data(), a.fch.data(), a.fch.size());
  if (!write_output) return;  // fc_proj's output is not a saved activation: the backward needs only its input
  cpu::matmul_forward(proj_.data(), a.fch_gelu.data(), w.fc_proj_w, w.fc_proj_b, bt, 4 * c, c, w16.fc_proj_w);
  AlignedBuffer<float>& out = outputs_[static_cast<std::size_t>(layer)];
  cpu::add(out.data(), a.residual2.data(), proj_.data(), out.size());
}

float Gpt::head_forward(const float* final_norm_unit, UnitWeights embedding_unit, std::span<const std::int32_t> targets) {
  STRATA_REQUIRE(targets.size() == targets_.size(), "expected {} target tokens, got {}", targets_.size(),
                 targets.size());
  std::copy(targets.begin(), targets.end(), targets_.begin());
  const int bt = static_cast<int>(tokens_per_batch());
  const int c = config().n_embd;
  const auto f = final_norm_view(layout_.unit(layout_.final_norm_unit()), final_norm_unit);
  const auto& embed_unit = layout_.unit(ModelLayout::kEmbeddingUnit);
  const auto e = embedding_view(embed_unit, embedding_unit.f32);
  const auto e16 = embedding_bf16(embed_unit, embedding_unit.bf16_copy);
  cpu::layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), layer_input(config().n_layer), f.lnf_w,
                         f.lnf_b, bt, c);
  cpu::matmul_forward(logits_.data(), lnf_.data(), e.wte, nullptr, bt, c, config().padded_vocab_size(), e16.wte);
  cpu::cross_entropy_forward(losses_.data(), lse_.data(), logits_.data(), targets_.data(), bt, config().vocab_size,
                             config().padded_vocab_size());
  double sum = 0.0;
  for (int i = 0; i < bt; ++i) sum += losses_[static_cast<std::size_t>(i)];
  return static_cast<float>(sum / bt);
}

void Gpt::head_backward(const float* final_norm_unit, UnitWeights embedding_unit, UnitGrad final_norm_grad,
                        UnitGrad embedding_grad, float loss_scale) {
  const int bt = static_cast<int>(tokens_per_batch());
  const int c = config().n_embd;
  const int vp = config().padded_vocab_size();
  const auto& final_unit = layout_.unit(layout_.final_norm_unit());
  const auto& embed_unit = layout_.unit(ModelLayout::kEmbeddingUnit);
  const auto f = final_norm_view(final_unit, final_norm_unit);
  const auto df = final_norm_view(final_unit, final_norm_grad.values);
  const auto e = embedding_view(embed_unit, embedding_unit.f32);
  const auto e16 = embedding_bf16(embed_unit, embedding_unit.bf16_copy);
  const auto de = embedding_view(embed_unit, embedding_grad.values);
  if (embedding_grad.write == GradWrite::kOverwrite) {
    std::fill(de.wpe, embedding_grad.values + embed_unit.numel, 0.0f);  // the position rows: the lookup adds to them
  }

  cpu::cross_entropy_backward(logits_.data(), lse_.data(), targets_.data(), bt, config().vocab_size, vp,
                              loss_scale / static_cast<float>(bt));
  cpu::matmul_backward(dln_.data(), de.wte, nullptr, logits_.data(), lnf_.data(), e.wte, bt, c, vp, e16.wte,
                       embedding_grad.write);
  dresidual_.fill_zero();
  cpu::layernorm_backward(dresidual_.data(), df.lnf_w, df.lnf_b, dln_.data(), layer_input(config().n_layer),
                          f.lnf_w, lnf_mean_.data(), lnf_rstd_.data(), bt, c, final_norm_grad.write);
}

void Gpt::block_backward(int layer, UnitWeights block_unit, UnitGrad block_grad) {
  const int bt = static_cast<int>(tokens_per_batch());
  const int c = config().n_embd;
  const auto& unit = layout_.unit(layout_.block_unit(layer));
  const auto w = block_view(unit, block_unit.f32);
  const auto w16 = block_bf16(unit, block_unit.bf16_copy);
  const auto g = block_view(unit, block_grad.values);
  const GradWrite write = block_grad.write;
  BlockActivations& a = activations(layer);
  const float* x = layer_input(layer);
  float* dres = dresidual_.data();  // d(output) on entry, d(input) on exit

  // MLP branch: output = residual2 + fc_proj(gelu(fc(ln2(residual2))))
  cpu::matmul_backward(dfch_.data(), g.fc_proj_w, g.fc_proj_b, dres, a.fch_gelu.data(), w.fc_proj_w, bt, 4 * c, c,
                       w16.fc_proj_w, write);
  cpu::gelu_backward(dfch_.data(), a.fch.data(), dfch_.data(), dfch_.size());
  cpu::matmul_backward(dln_.data(), g.fc_w, g.fc_b, dfch_.data(), a.ln2.data(), w.fc_w, bt, c, 4 * c, w16.fc_w,
                       write);
  cpu::layernorm_backward(dres, g.ln2_w, g.ln2_b, dln_.data(), a.residual2.data(), w.ln2_w, a.ln2_mean.data(),
                          a.ln2_rstd.data(), bt, c, write);
  // Attention branch: residual2 = x + attn_proj(attention(qkv(ln1(x))))
  cpu::matmul_backward(datty_.data(), g.attn_proj_w, g.attn_proj_b, dres, a.atty.data(), w.attn_proj_w, bt, c, c,
                       w16.attn_proj_w, write);
  cpu::flash_attention_backward(dqkv_.data(), datty_.data(), a.atty.data(), a.qkv.data(), a.lse.data(), batch_,
                                seq_len_, c, config().n_head);
  cpu::matmul_backward(dln_.data(), g.qkv_w, g.qkv_b, dqkv_.data(), a.ln1.data(), w.qkv_w, bt, c, 3 * c, w16.qkv_w,
                       write);
  cpu::layernorm_backward(dres, g.ln1_w, g.ln1_b, dln_.data(), x, w.ln1_w, a.ln1_mean.data(), a.ln1_rstd.data(),
                          bt, c, write);
}

void Gpt::embedding_backward(UnitGrad embedding_grad) {
  const auto& unit = layout_.unit(ModelLayout::kEmbeddingUnit);
  if (embedding_grad.write == GradWrite::kOverwrite) {
    std::fill(embedding_grad.values, embedding_grad.values + unit.numel, 0.0f);
  }
  const auto de = embedding_view(unit, embedding_grad.values);
  cpu::embedding_backward(de.wte, de.wpe, dresidual_.data(), tokens_.data(), batch_, seq_len_, config().n_embd);
}

float Gpt::forward(const UnitBuffers& params, std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                   std::span<const bf16* const> params_bf16) {
  const auto weights = [&](std::size_t u) { return UnitWeights(params.unit(u), unit_bf16(params_bf16, u)); };
  embedding_forward(params.unit(ModelLayout::kEmbeddingUnit), tokens);
  for (int l = 0; l < config().n_layer; ++l) block_forward(l, weights(layout_.block_unit(l)));
  return head_forward(params.unit(layout_.final_norm_unit()), weights(ModelLayout::kEmbeddingUnit), targets);
}

void Gpt::backward(const UnitBuffers& params, UnitBuffers& grads, float loss_scale,
                   std::span<const bf16* const> params_bf16, GradWrite write) {
  const auto weights = [&](std::size_t u) { return UnitWeights(params.unit(u), unit_bf16(params_bf16, u)); };
  const auto grad = [&](std::size_t u) { return UnitGrad(grads.unit(u), write); };
  head_backward(params.unit(layout_.final_norm_unit()), weights(ModelLayout::kEmbeddingUnit),
                grad(layout_.final_norm_unit()), grad(ModelLayout::kEmbeddingUnit), loss_scale);
  for (int l = config().n_layer - 1; l >= 0; --l) {
    if (checkpointing_.recomputes(l)) block_recompute(l, weights(layout_.block_unit(l)));
    block_backward(l, weights(layout_.block_unit(l)), grad(layout_.block_unit(l)));
  }
  embedding_backward(grads.unit(ModelLayout::kEmbeddingUnit));
}

}  // namespace strata
