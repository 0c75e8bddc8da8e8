// Causal multi-head self-attention over a fused qkv activation (B, T, 3C): q | k | v per token.
#pragma once

namespace strata::cpu {

// out (B, T, C) = softmax(q k^T / sqrt(hs), causal) v per head; att (B, NH, T, T) keeps the
// probabilities (zeros above the diagonal) for backward.
void attention_forward(float* out, float* att, const float* qkv, int batch, int seq_len, int channels,
                       int heads);

// dqkv (B, T, 3C) is overwritten with the gradient of q, k and v.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int batch,
                        int seq_len, int channels, int heads);

}  // namespace strata::cpu
