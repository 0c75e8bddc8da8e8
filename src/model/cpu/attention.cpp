// Attention as per-(batch, head) matrix products on strided views of qkv (no copies), parallel
// over (batch, head); OpenBLAS runs single-threaded inside the parallel region.
#include "model/cpu/attention.hpp"

#include "core/op_profile.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "core/blas.hpp"
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
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < batch * heads; ++bh) {
    const int b = bh / heads, h = bh % heads;
    const float* q = qkv + static_cast<std::size_t>(b) * t * c3 + h * hs;
    const float* k = q + c;
    const float* v = q + 2 * c;
    float* p = att + static_cast<std::size_t>(bh) * t * t;
    gemm(Transpose::kNo, Transpose::kYes, t, t, hs, scale, q, c3, k, c3, 0.0f, p, t);
    causal_softmax(p, t);
    float* o = out + static_cast<std::size_t>(b) * t * c + h * hs;
    gemm(Transpose::kNo, Transpose::kNo, t, hs, t, 1.0f, p, t, v, c3, 0.0f, o, c);
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int batch,
                        int seq_len, int channels, int heads) {
  const OpScope scope(Op::kAttentionBackward);
  const int t = seq_len, c = channels, hs = channels / heads;
  const int c3 = 3 * c;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    std::vector<float> ds(static_cast<std::size_t>(t) * t);
#pragma omp for schedule(static)
    for (int bh = 0; bh < batch * heads; ++bh) {
      const int b = bh / heads, h = bh % heads;
      const std::size_t token0 = static_cast<std::size_t>(b) * t;
      const float* q = qkv + token0 * c3 + h * hs;
      const float* k = q + c;
      const float* v = q + 2 * c;
      float* dq = dqkv + token0 * c3 + h * hs;
      float* dk = dq + c;
      float* dv = dq + 2 * c;
      const float* p = att + static_cast<std::size_t>(bh) * t * t;
      const float* dout_h = dout + token0 * c + h * hs;
      // dP = dO V^T, dV = P^T dO
      gemm(Transpose::kNo, Transpose::kYes, t, t, hs, 1.0f, dout_h, c, v, c3, 0.0f, ds.data(), t);
      gemm(Transpose::kYes, Transpose::kNo, t, hs, t, 1.0f, p, t, dout_h, c, 0.0f, dv, c3);
      // dS = P * (dP - rowsum(P * dP)); zero above the diagonal because P is.
      for (int i = 0; i < t; ++i) {
        const float* prow = p + static_cast<std::size_t>(i) * t;
        float* drow = ds.data() + static_cast<std::size_t>(i) * t;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j <= i; ++j) dot += prow[j] * drow[j];
#pragma omp simd
        for (int j = 0; j < t; ++j) drow[j] = prow[j] * (drow[j] - dot);
      }
      // dQ = dS K / sqrt(hs), dK = dS^T Q / sqrt(hs)
      gemm(Transpose::kNo, Transpose::kNo, t, hs, t, scale, ds.data(), t, k, c3, 0.0f, dq, c3);
      gemm(Transpose::kYes, Transpose::kNo, t, hs, t, scale, ds.data(), t, q, c3, 0.0f, dk, c3);
    }
  }
}

}  // namespace strata::cpu
