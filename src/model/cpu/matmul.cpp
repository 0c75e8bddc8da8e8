// Linear-layer kernels: the matrix products go through the matmul seam (model/cpu/gemm), bias
// handling stays vectorized here.
#include "model/cpu/matmul.hpp"

#include "core/op_profile.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "core/aligned_buffer.hpp"
#include "model/cpu/gemm.hpp"

namespace strata::cpu {

namespace {
// The floats of a product's operands, as the profile counts them: the weight is read as bf16
// where a working copy is given.
double weight_bytes(int c, int oc, const bf16* weight_bf16) {
  return static_cast<double>(c) * oc * (weight_bf16 != nullptr ? sizeof(bf16) : sizeof(float));
}
double activation_bytes(int rows, int cols) { return 4.0 * rows * cols; }
}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int rows, int c,
                    int oc, const bf16* weight_bf16) {
  const OpScope scope(Op::kMatmulForward,
                      activation_bytes(rows, c) + weight_bytes(c, oc, weight_bf16) + activation_bytes(rows, oc),
                      2.0 * rows * c * oc);
  float beta = 0.0f;
  if (bias != nullptr) {
    // Seed each output row with the bias and let the product be added to it (beta = 1).
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) std::memcpy(out + static_cast<std::size_t>(r) * oc, bias, sizeof(float) * oc);
    beta = 1.0f;
  }
  cpu::gemm(Transpose::kNo, Transpose::kYes, rows, oc, c, 1.0f, inp, c, weight, c, beta, out, oc, {}, weight_bf16);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int rows, int c, int oc, const bf16* weight_bf16, GradWrite write) {
  const bool add = write == GradWrite::kAccumulate;
  // dout and inp read, dinp written, dweight written (read too when accumulated), the weight read.
  const OpScope scope(Op::kMatmulBackward,
                      activation_bytes(rows, oc) + 2.0 * activation_bytes(rows, c) + weight_bytes(c, oc, weight_bf16) +
                          (add ? 8.0 : 4.0) * c * oc,
                      4.0 * rows * c * oc);
  if (matmul_settings().dtype == ComputeDType::kBF16 && weight_bf16 != nullptr) {
    // Both products read dout: it is rounded to bf16 once for the two of them, not once each.
    thread_local AlignedBuffer<bf16> dout16, inp16;
    const auto rounded = [rows](AlignedBuffer<bf16>& buffer, const float* x, int cols) {
      const std::size_t n = static_cast<std::size_t>(rows) * cols;
      if (buffer.size() < n) buffer = AlignedBuffer<bf16>(n);
      fp32_to_bf16(buffer.data(), x, n);
    };
    rounded(dout16, dout, oc);
    rounded(inp16, inp, c);
    if (dinp != nullptr) {
      gemm_bf16(Transpose::kNo, Transpose::kNo, rows, c, oc, 1.0f, dout16.data(), oc, weight_bf16, c, 0.0f, dinp, c);
    }
    gemm_bf16(Transpose::kYes, Transpose::kNo, oc, c, rows, 1.0f, dout16.data(), oc, inp16.data(), c,
              add ? 1.0f : 0.0f, dweight, c);
  } else {
    if (dinp != nullptr) {
      cpu::gemm(Transpose::kNo, Transpose::kNo, rows, c, oc, 1.0f, dout, oc, weight, c, 0.0f, dinp, c, {}, weight_bf16);
    }
    cpu::gemm(Transpose::kYes, Transpose::kNo, oc, c, rows, 1.0f, dout, oc, inp, c, add ? 1.0f : 0.0f, dweight, c);
  }
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
      float* out = dbias + begin;
      if (add) {
        for (int j = 0; j < width; ++j) out[j] += acc[j];
      } else {
        std::memcpy(out, acc, sizeof(float) * static_cast<std::size_t>(width));
      }
    }
  }
}

}  // namespace strata::cpu
