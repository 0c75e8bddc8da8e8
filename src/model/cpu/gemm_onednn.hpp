// The oneDNN implementation of the matmul seam (model/cpu/gemm): dnnl_sgemm for one fp32 product,
// a matmul primitive per shape (made once and reused) for bf16 inputs with an fp32 result and for
// batched products in one call.
// Without oneDNN at build time only onednn_available() (false) may be called.
#pragma once

#include <string>

#include "model/cpu/gemm.hpp"

namespace strata::cpu {

// "oneDNN 2.6.3, ISA avx512_core_amx"
std::string onednn_description();

void onednn_gemm(bool bf16_inputs, Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc, const GemmBatch& batch,
                 const bf16* b_bf16);

// One product of bf16 operands (both already converted) on the calling thread.
void onednn_gemm_bf16(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const bf16* a, int lda,
                      const bf16* b, int ldb, float beta, float* c, int ldc);

}  // namespace strata::cpu
