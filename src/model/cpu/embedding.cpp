// Embedding kernels; backward is parallel over channel blocks, so repeated tokens never race.
#include "model/cpu/embedding.hpp"

#include "core/op_profile.hpp"

#include <algorithm>
#include <cstddef>

namespace strata::cpu {

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, int batch,
                       int seq_len, int channels) {
  const OpScope scope(Op::kEmbedding, 12.0 * batch * seq_len * channels);
  const int c = channels;
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < batch * seq_len; ++bt) {
    const float* tok = wte + static_cast<std::size_t>(tokens[bt]) * c;
    const float* pos = wpe + static_cast<std::size_t>(bt % seq_len) * c;
    float* o = out + static_cast<std::size_t>(bt) * c;
#pragma omp simd
    for (int i = 0; i < c; ++i) o[i] = tok[i] + pos[i];
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, int batch,
                        int seq_len, int channels) {
  const OpScope scope(Op::kEmbedding, 12.0 * batch * seq_len * channels);
  const int c = channels;
  constexpr int kBlock = 64;
  const int blocks = (c + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < blocks; ++blk) {
    const int begin = blk * kBlock;
    const int end = std::min(c, begin + kBlock);
    for (int bt = 0; bt < batch * seq_len; ++bt) {
      const float* d = dout + static_cast<std::size_t>(bt) * c;
      float* tok = dwte + static_cast<std::size_t>(tokens[bt]) * c;
      float* pos = dwpe + static_cast<std::size_t>(bt % seq_len) * c;
#pragma omp simd
      for (int i = begin; i < end; ++i) {
        tok[i] += d[i];
        pos[i] += d[i];
      }
    }
  }
}

}  // namespace strata::cpu
