// Softmax + cross-entropy over the first `vocab` of `padded_vocab` logits per row; the padded
// tail is masked out of the softmax and gets zero gradient.
#pragma once

#include <cstdint>

namespace strata::cpu {

// losses[r] = logsumexp(logits[r, :vocab]) - logits[r, target]; lse[r] kept for backward.
// The logits are left untouched.
void cross_entropy_forward(float* losses, float* lse, const float* logits, const std::int32_t* targets,
                           int rows, int vocab, int padded_vocab);

// logits are overwritten by scale * (softmax - onehot(target)); the padded tail becomes 0.
void cross_entropy_backward(float* logits, const float* lse, const std::int32_t* targets, int rows, int vocab,
                            int padded_vocab, float scale);

}  // namespace strata::cpu
