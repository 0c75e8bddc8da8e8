// The attention benchmark behind `strata_bench attention`: the fused kernel against the plain one.
#pragma once

namespace strata {

struct AttentionBenchSettings {
  int batch = 4, seq_len = 1024, channels = 768, heads = 12, repeats = 5;
  bool plain = true;  // also time the plain attention (it stores B x NH x T x T probabilities)
};

// Prints one JSON line per kernel (fused, plain): forward and backward median milliseconds and
// GFLOP/s of the causal products (the half of QK^T and PV at or below the diagonal; backward
// counts its five products, the recomputed scores included), in the process's compute mode.
void bench_attention(const AttentionBenchSettings& settings);

}  // namespace strata
