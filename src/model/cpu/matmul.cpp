// Linear-layer kernels: the matrix products go to OpenBLAS, bias handling stays vectorized here.
#include "model/cpu/matmul.hpp"

#include "core/op_profile.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "core/blas.hpp"

namespace strata::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int rows, int c,
                    int oc) {
  const OpScope scope(Op::kMatmulForward);
  float beta = 0.0f;
  if (bias != nullptr) {
    // Seed each output row with the bias and let sgemm add the product (beta = 1).
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) std::memcpy(out + static_cast<std::size_t>(r) * oc, bias, sizeof(float) * oc);
    beta = 1.0f;
  }
  gemm(Transpose::kNo, Transpose::kYes, rows, oc, c, 1.0f, inp, c, weight, c, beta, out, oc);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int rows, int c, int oc) {
  const OpScope scope(Op::kMatmulBackward);
  if (dinp != nullptr) gemm(Transpose::kNo, Transpose::kNo, rows, c, oc, 1.0f, dout, oc, weight, c, 0.0f, dinp, c);
  gemm(Transpose::kYes, Transpose::kNo, oc, c, rows, 1.0f, dout, oc, inp, c, 1.0f, dweight, c);
  if (dbias != nullptr) {
    constexpr int kBlock = 256;
    const int blocks = (oc + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; ++blk) {
      const int begin = blk * kBlock;
      const int width = std::min(kBlock, oc - begin);
      float acc[kBlock] = {};
      for (int r = 0; r < rows; ++r) {
        const float* row = dout + static_cast<std::size_t>(r) * oc + begin;
#pragma omp simd
        for (int j = 0; j < width; ++j) acc[j] += row[j];
      }
      for (int j = 0; j < width; ++j) dbias[begin + j] += acc[j];
    }
  }
}

}  // namespace strata::cpu
