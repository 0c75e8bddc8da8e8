// Sampling text from a trained model: the next token drawn from the logits (temperature, top-k,
// a seeded generator), over the key/value cache of model/generator or, for checking it and for
// the benchmark, by recomputing the whole context with the training forward for every token.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/rng.hpp"
#include "model/gpt_config.hpp"
#include "model/unit_buffers.hpp"

namespace strata {

struct SampleSettings {
  int tokens = 200;           // new tokens per sample
  double temperature = 1.0;   // 0: greedy
  int top_k = 0;              // draw among the k most likely only (0: all; 1: greedy)
  bool cache = true;          // false: recompute the whole context for every token
};

// The index of the next token: the largest logit when temperature is 0 or top_k is 1 (the first
// of equal ones), else a draw from softmax(logits / temperature) restricted to the top_k largest.
std::int32_t draw_token(std::span<const float> logits, double temperature, int top_k, Rng& rng);

// The prompt's continuation, one token at a time (each passed to on_token as it is drawn). A
// context that outgrows the model's keeps its newer half and goes on from there.
std::vector<std::int32_t> generate(const GptConfig& config, const UnitBuffers& params,
                                   std::span<const std::int32_t> prompt, const SampleSettings& settings, Rng& rng,
                                   const std::function<void(std::int32_t)>& on_token = {});

}  // namespace strata
