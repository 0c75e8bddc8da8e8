// GELU kernels, vectorized through fast_tanh.
#include "model/cpu/gelu.hpp"

#include "core/op_profile.hpp"

#include "core/vector_math.hpp"

namespace strata::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

void gelu_forward(float* out, const float* inp, std::size_t n) {
  const OpScope scope(Op::kGelu, 8.0 * static_cast<double>(n));
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    out[i] = 0.5f * x * (1.0f + fast_tanh(u));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) {
  const OpScope scope(Op::kGelu, 12.0 * static_cast<double>(n));
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float th = fast_tanh(u);
    const float sech2 = 1.0f - th * th;
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    dinp[i] = grad * dout[i];
  }
}

}  // namespace strata::cpu
