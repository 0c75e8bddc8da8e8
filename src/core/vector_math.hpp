// Branch-free exp and tanh that the compiler vectorizes inside loops; libm's scalar expf/tanhf
// would dominate softmax and GELU time. Accuracy: exp within 2 ulp over the float range.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace strata {

// exp(x) by range reduction x = n ln2 + r, |r| <= ln2/2, and a degree-6 polynomial for e^r
// (Cephes coefficients). Inputs below -88.37 return 0, above 88.37 return +inf.
inline float fast_exp(float x) {
  constexpr float kMax = 88.3762626647949f;
  constexpr float kMin = -88.3762626647949f;
  x = x > kMax ? kMax : x;
  x = x < kMin ? kMin : x;
  // Round to nearest by adding and removing 1.5 * 2^23 (std::floor would block vectorization
  // without -ffast-math; this needs only that the compiler keeps IEEE order, which it does).
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// tanh(x) = 1 - 2 / (1 + e^{2x}); absolute error about 1e-7, which is what GELU needs.
inline float fast_tanh(float x) { return 1.0f - 2.0f / (1.0f + fast_exp(2.0f * x)); }

// A loop whose body costs more than its loads (exp, tanh) over an array larger than the caches
// outruns the hardware prefetcher: the same loop measured 2.5x slower streaming from memory than
// over data already in L2. Such loops walk their array in chunks of kStreamChunk floats and ask
// for the lines kStreamAhead floats ahead before each chunk.
inline constexpr std::size_t kStreamChunk = 1024;
inline constexpr std::size_t kStreamAhead = 4 * kStreamChunk;

// Prefetches the chunk starting kStreamAhead floats after `begin`, clipped to `end`; `for_write`
// asks for the lines in exclusive state, as a store to them will.
inline void prefetch_stream_ahead(const float* begin, const float* end, bool for_write = false) {
  constexpr std::size_t kLineFloats = 64 / sizeof(float);
  const float* first = begin + kStreamAhead;
  const float* last = first + kStreamChunk < end ? first + kStreamChunk : end;
  for (const float* p = first; p < last; p += kLineFloats) {
    if (for_write) {
      __builtin_prefetch(p, 1);
    } else {
      __builtin_prefetch(p, 0);
    }
  }
}

}  // namespace strata
