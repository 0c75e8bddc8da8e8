// GELU kernels, vectorized through fast_tanh.
#include "model/cpu/gelu.hpp"

#include "core/op_profile.hpp"

#include <algorithm>

#include "core/vector_math.hpp"

namespace strata::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

void gelu_forward(float* out, const float* inp, std::size_t n) {
  const OpScope scope(Op::kGelu, 8.0 * static_cast<double>(n));
  const std::size_t chunks = (n + kStreamChunk - 1) / kStreamChunk;
#pragma omp parallel for schedule(static)
  for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
    const std::size_t begin = chunk * kStreamChunk;
    const std::size_t end = std::min(n, begin + kStreamChunk);
    prefetch_stream_ahead(inp + begin, inp + n);
#pragma omp simd
    for (std::size_t i = begin; i < end; ++i) {
      const float x = inp[i];
      const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
      out[i] = 0.5f * x * (1.0f + fast_tanh(u));
    }
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) {
  const OpScope scope(Op::kGelu, 12.0 * static_cast<double>(n));
  const std::size_t chunks = (n + kStreamChunk - 1) / kStreamChunk;
#pragma omp parallel for schedule(static)
  for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
    const std::size_t begin = chunk * kStreamChunk;
    const std::size_t end = std::min(n, begin + kStreamChunk);
    prefetch_stream_ahead(inp + begin, inp + n);
    prefetch_stream_ahead(dout + begin, dout + n);
#pragma omp simd
    for (std::size_t i = begin; i < end; ++i) {
      const float x = inp[i];
      const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
      const float th = fast_tanh(u);
      const float sech2 = 1.0f - th * th;
      const float grad =
          0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
      dinp[i] = grad * dout[i];
    }
  }
}

}  // namespace strata::cpu
