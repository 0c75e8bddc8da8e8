// Attention as batched matrix products over (batch, head) on strided views of qkv (no copies),
// through the matmul seam; the causal softmax and its backward are row loops here.
#include "model/cpu/attention.hpp"

#include "core/op_profile.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "model/cpu/gemm.hpp"
#include "core/vector_math.hpp"

namespace strata::cpu {

namespace {

// Row-wise causal softmax of s (T x T) in place: entries above the diagonal become 0.
void causal_softmax(float* s, int t) {
  for (int i = 0; i < t; ++i) {
    float* row = s + static_cast<std::size_t>(i) * t;
    float max = -std::numeric_limits<float>::infinity();
    for (int j = 0; j <= i; ++j) max = row[j] > max ? row[j] : max;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j <= i; ++j) {
      const float e = fast_exp(row[j] - max);
      row[j] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j <= i; ++j) row[j] *= inv;
    for (int j = i + 1; j < t; ++j) row[j] = 0.0f;
  }
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int batch, int seq_len, int channels,
                       int heads) {
  const OpScope scope(Op::kAttentionForward);
  const int t = seq_len, c = channels, hs = channels / heads;
  const int c3 = 3 * c;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // Per (batch, head): q, k and v are hs-wide column blocks of qkv rows (stride 3C), att a dense
  // T x T block, out an hs-wide column block of the (B, T, C) output.
  const std::ptrdiff_t tc3 = static_cast<std::ptrdiff_t>(t) * c3, tt = static_cast<std::ptrdiff_t>(t) * t;
  const float* q = qkv;
  const float* k = qkv + c;
  const float* v = qkv + 2 * c;
  // S = Q K^T / sqrt(hs)
  gemm(Transpose::kNo, Transpose::kYes, t, t, hs, scale, q, c3, k, c3, 0.0f, att, t,
       GemmBatch{batch, heads, tc3, hs, tc3, hs, heads * tt, tt});
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < batch * heads; ++bh) causal_softmax(att + bh * tt, t);
  // O = P V
  gemm(Transpose::kNo, Transpose::kNo, t, hs, t, 1.0f, att, t, v, c3, 0.0f, out, c,
       GemmBatch{batch, heads, heads * tt, tt, tc3, hs, static_cast<std::ptrdiff_t>(t) * c, hs});
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int batch,
                        int seq_len, int channels, int heads) {
  const OpScope scope(Op::kAttentionBackward);
  const int t = seq_len, c = channels, hs = channels / heads;
  const int c3 = 3 * c;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const std::ptrdiff_t tc3 = static_cast<std::ptrdiff_t>(t) * c3, tt = static_cast<std::ptrdiff_t>(t) * t;
  const std::ptrdiff_t tc = static_cast<std::ptrdiff_t>(t) * c;
  const float* q = qkv;
  const float* k = qkv + c;
  const float* v = qkv + 2 * c;
  float* dq = dqkv;
  float* dk = dqkv + c;
  float* dv = dqkv + 2 * c;
  thread_local std::vector<float> ds_buffer;
  ds_buffer.resize(static_cast<std::size_t>(batch) * heads * tt);
  float* ds = ds_buffer.data();
  // dP = dO V^T, dV = P^T dO
  gemm(Transpose::kNo, Transpose::kYes, t, t, hs, 1.0f, dout, c, v, c3, 0.0f, ds, t,
       GemmBatch{batch, heads, tc, hs, tc3, hs, heads * tt, tt});
  gemm(Transpose::kYes, Transpose::kNo, t, hs, t, 1.0f, att, t, dout, c, 0.0f, dv, c3,
       GemmBatch{batch, heads, heads * tt, tt, tc, hs, tc3, hs});
  // dS = P * (dP - rowsum(P * dP)); zero above the diagonal because P is.
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < batch * heads; ++bh) {
    for (int i = 0; i < t; ++i) {
      const float* prow = att + bh * tt + static_cast<std::ptrdiff_t>(i) * t;
      float* drow = ds + bh * tt + static_cast<std::ptrdiff_t>(i) * t;
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int j = 0; j <= i; ++j) dot += prow[j] * drow[j];
#pragma omp simd
      for (int j = 0; j < t; ++j) drow[j] = prow[j] * (drow[j] - dot);
    }
  }
  // dQ = dS K / sqrt(hs), dK = dS^T Q / sqrt(hs)
  gemm(Transpose::kNo, Transpose::kNo, t, hs, t, scale, ds, t, k, c3, 0.0f, dq, c3,
       GemmBatch{batch, heads, heads * tt, tt, tc3, hs, tc3, hs});
  gemm(Transpose::kYes, Transpose::kNo, t, hs, t, scale, ds, t, q, c3, 0.0f, dk, c3,
       GemmBatch{batch, heads, heads * tt, tt, tc3, hs, tc3, hs});
}

}  // namespace strata::cpu
