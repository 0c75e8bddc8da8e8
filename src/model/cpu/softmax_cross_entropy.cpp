// Cross-entropy kernels, parallel over rows; the softmax is recomputed in backward from the
// saved log-sum-exp so the forward leaves the logits readable.
#include "model/cpu/softmax_cross_entropy.hpp"

#include "core/op_profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "core/vector_math.hpp"

namespace strata::cpu {

void cross_entropy_forward(float* losses, float* lse, const float* logits, const std::int32_t* targets,
                           int rows, int vocab, int padded_vocab) {
  const OpScope scope(Op::kCrossEntropy, 4.0 * rows * vocab);
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* row = logits + static_cast<std::size_t>(r) * padded_vocab;
    float best = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : best)
    for (int i = 0; i < vocab; ++i) best = row[i] > best ? row[i] : best;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < vocab; ++i) sum += fast_exp(row[i] - best);
    const float log_sum_exp = best + std::log(sum);
    lse[r] = log_sum_exp;
    losses[r] = log_sum_exp - row[targets[r]];
  }
}

void cross_entropy_backward(float* logits, const float* lse, const std::int32_t* targets, int rows, int vocab,
                            int padded_vocab, float scale) {
  const OpScope scope(Op::kCrossEntropy, 8.0 * rows * padded_vocab);
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    float* row = logits + static_cast<std::size_t>(r) * padded_vocab;
    const float shift = lse[r];
    for (int begin = 0; begin < vocab; begin += static_cast<int>(kStreamChunk)) {
      const int end = std::min(vocab, begin + static_cast<int>(kStreamChunk));
      prefetch_stream_ahead(row + begin, row + vocab, /*for_write=*/true);
#pragma omp simd
      for (int i = begin; i < end; ++i) row[i] = scale * fast_exp(row[i] - shift);
    }
    for (int i = vocab; i < padded_vocab; ++i) row[i] = 0.0f;
    row[targets[r]] -= scale;
  }
}

}  // namespace strata::cpu
