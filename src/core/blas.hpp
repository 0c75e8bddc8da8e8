// The one door to BLAS: row-major sgemm through OpenBLAS, plus a description of the library and
// kernel actually loaded (printed at start-up, so a slow reference BLAS can never hide).
#pragma once

#include <string>

namespace strata {

enum class Transpose { kNo, kYes };

// C(m x n) = alpha * op(A)(m x k) * op(B)(k x n) + beta * C, all row-major.
void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc);

// e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH USE_OPENMP Haswell, kernel Haswell, 2 threads".
std::string blas_description();

}  // namespace strata
