// Row-major sgemm through OpenBLAS's CBLAS, and the start-up description of the BLAS in use.
#include "core/blas.hpp"

#include <cblas.h>
#include <fmt/format.h>

namespace strata {

void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a == Transpose::kYes ? CblasTrans : CblasNoTrans,
              trans_b == Transpose::kYes ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

std::string blas_description() {
  return fmt::format("{} | kernel {} | {} threads", openblas_get_config(), openblas_get_corename(),
                     openblas_get_num_threads());
}

}  // namespace strata
