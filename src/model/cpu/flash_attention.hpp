// Causal multi-head self-attention fused in the manner of FlashAttention-2: the model's attention.
// Same inputs and outputs as the plain attention (model/cpu/attention), which stays its reference,
// but it keeps per query only the log-sum-exp of its scores (B, NH, T) instead of the (B, NH, T, T)
// probabilities, and never writes a T x T matrix.
#pragma once

namespace strata::cpu {

// out (B, T, C) = softmax(q k^T / sqrt(hs), causal) v per head, from qkv (B, T, 3C); lse (B, NH, T)
// receives each query's log-sum-exp of its scaled scores, which the backward recomputes from.
void flash_attention_forward(float* out, float* lse, const float* qkv, int batch, int seq_len, int channels,
                             int heads);

// dqkv (B, T, 3C) is overwritten with the gradient of q, k and v; out and lse are the forward's.
void flash_attention_backward(float* dqkv, const float* dout, const float* out, const float* qkv, const float* lse,
                              int batch, int seq_len, int channels, int heads);

}  // namespace strata::cpu
