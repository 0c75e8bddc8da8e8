// bfloat16 storage: the top 16 bits of an fp32, rounded to nearest even. Used for working
// weights and communicated gradients in --dtype bf16; compute stays fp32.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace strata {

using bf16 = std::uint16_t;

inline bf16 to_bf16(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) return static_cast<bf16>((bits >> 16) | 0x40);  // NaN stays NaN
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<bf16>((bits + rounding) >> 16);
}

inline float from_bf16(bf16 x) { return std::bit_cast<float>(static_cast<std::uint32_t>(x) << 16); }

void fp32_to_bf16(bf16* out, const float* in, std::size_t n);
// The same on the calling thread alone, for use inside a parallel region (vectorized: as fast as
// the AVX-512 BF16 conversion instruction here, and exact where that one flushes subnormals).
void fp32_to_bf16_serial(bf16* out, const float* in, std::size_t n);
void bf16_to_fp32(float* out, const bf16* in, std::size_t n);
void bf16_to_fp32_serial(float* out, const bf16* in, std::size_t n);
// x = from_bf16(to_bf16(x)) in place: fp32 values carrying bf16 precision.
void round_to_bf16(float* x, std::size_t n);

}  // namespace strata
