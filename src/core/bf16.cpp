// Parallel, vectorized bf16 conversions.
#include "core/bf16.hpp"

namespace strata {

void fp32_to_bf16(bf16* out, const float* in, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) out[i] = to_bf16(in[i]);
}

void fp32_to_bf16_serial(bf16* out, const float* in, std::size_t n) {
#pragma omp simd
  for (std::size_t i = 0; i < n; ++i) out[i] = to_bf16(in[i]);
}

void bf16_to_fp32(float* out, const bf16* in, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) out[i] = from_bf16(in[i]);
}

void bf16_to_fp32_serial(float* out, const bf16* in, std::size_t n) {
#pragma omp simd
  for (std::size_t i = 0; i < n; ++i) out[i] = from_bf16(in[i]);
}

void round_to_bf16(float* x, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) x[i] = from_bf16(to_bf16(x[i]));
}

}  // namespace strata
