// Text generation from a whole model in one process: one token's forward at a time over a
// key/value cache, so each new token costs one token's forward rather than the whole context's.
// The same kernels as training (layer norm, the matmul seam, GELU); attention for the one query
// runs over the cached keys and values of the positions before it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "model/gpt_config.hpp"
#include "model/parameter_layout.hpp"
#include "model/unit_buffers.hpp"

namespace strata {

class Generator {
 public:
  // params: every unit of the model's layout, whole; it must outlive the generator.
  Generator(const GptConfig& config, const UnitBuffers& params);

  // Forgets the context (the cache is overwritten from position 0).
  void reset() { position_ = 0; }
  int position() const { return position_; }
  int capacity() const { return layout_.config().context_length; }

  // Appends one token at the next position and returns the logits for the token after it
  // (vocab_size values, valid until the next call). Refuses a token outside the vocabulary or a
  // context already at the model's length.
  std::span<const float> append(std::int32_t token);

 private:
  ModelLayout layout_;
  const UnitBuffers& params_;
  int position_ = 0;
  std::vector<AlignedBuffer<float>> keys_, values_;  // per layer: context x C
  AlignedBuffer<float> x_, ln_, qkv_, att_, proj_, fch_, fch_gelu_, scores_, logits_, stats_;
};

}  // namespace strata
