// The matmul seam's settings and dispatch, the reference loops, and the OpenBLAS path (bf16
// compute there is emulated: the inputs rounded to bf16, then an fp32 product, which is what a
// bf16 x bf16 product with fp32 accumulation computes, up to the order of the sums).
#include "model/cpu/gemm.hpp"

#include <fmt/format.h>

#include <atomic>
#include <vector>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "model/cpu/gemm_onednn.hpp"

namespace strata::cpu {

namespace {

std::atomic<MatmulImpl> g_impl{default_matmul_impl()};
std::atomic<ComputeDType> g_dtype{ComputeDType::kF32};

// op(X) element (i, j) of a row-major X with leading dimension ld.
inline float at(const float* x, Transpose t, int ld, int i, int j) {
  return t == Transpose::kNo ? x[static_cast<std::size_t>(i) * ld + j] : x[static_cast<std::size_t>(j) * ld + i];
}

// The stored block of op(X) (rows x cols as stored, leading dimension ld), each row passed through
// convert_row(dst, src, cols) densely into `out`; returns its leading dimension.
template <class T, class ConvertRow>
int dense_copy(std::vector<float>& out, const T* x, Transpose t, int rows_of_op, int cols_of_op, int ld,
               ConvertRow convert_row) {
  const int rows = t == Transpose::kNo ? rows_of_op : cols_of_op;
  const int cols = t == Transpose::kNo ? cols_of_op : rows_of_op;
  out.resize(static_cast<std::size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    convert_row(out.data() + static_cast<std::size_t>(r) * cols, x + static_cast<std::size_t>(r) * ld, cols);
  }
  return cols;
}

// dense_copy with each value rounded to bf16 (the emulated bf16 product's inputs).
int rounded_copy(std::vector<float>& out, const float* x, Transpose t, int rows_of_op, int cols_of_op, int ld) {
  return dense_copy(out, x, t, rows_of_op, cols_of_op, ld, [](float* dst, const float* src, int cols) {
#pragma omp simd
    for (int j = 0; j < cols; ++j) dst[j] = from_bf16(to_bf16(src[j]));
  });
}

// One product by the reference loops or OpenBLAS, with bf16 inputs emulated.
void one_product(MatmulImpl impl, ComputeDType dtype, Transpose ta, Transpose tb, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (dtype == ComputeDType::kBF16) {
    thread_local std::vector<float> ra, rb;
    lda = rounded_copy(ra, a, ta, m, k, lda);
    ldb = rounded_copy(rb, b, tb, k, n, ldb);
    a = ra.data();
    b = rb.data();
  }
  if (impl == MatmulImpl::kReference) {
    gemm_reference(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    strata::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

// dense_copy of bf16 values, widened to fp32.
int widened_copy(std::vector<float>& out, const bf16* x, Transpose t, int rows_of_op, int cols_of_op, int ld) {
  return dense_copy(out, x, t, rows_of_op, cols_of_op, ld, [](float* dst, const bf16* src, int cols) {
    bf16_to_fp32_serial(dst, src, static_cast<std::size_t>(cols));
  });
}

}  // namespace

void set_matmul(MatmulSettings settings) {
  STRATA_CHECK(settings.impl != MatmulImpl::kOneDnn || onednn_available(), "oneDNN is not in this build");
  STRATA_CHECK(settings.impl != MatmulImpl::kOneDnn || settings.dtype != ComputeDType::kBF16 || onednn_bf16_available(),
               "oneDNN has no bf16 matmul on this CPU");
  g_impl = settings.impl;
  g_dtype = settings.dtype;
}

MatmulSettings matmul_settings() { return {g_impl.load(), g_dtype.load()}; }

MatmulImpl default_matmul_impl(ComputeDType dtype) {
  const bool onednn = dtype == ComputeDType::kBF16 ? onednn_bf16_available() : onednn_available();
  return onednn ? MatmulImpl::kOneDnn : MatmulImpl::kOpenBlas;
}

MatmulImpl parse_matmul_impl(std::string_view name, ComputeDType dtype) {
  if (name == "onednn") return MatmulImpl::kOneDnn;
  if (name == "openblas") return MatmulImpl::kOpenBlas;
  if (name == "reference") return MatmulImpl::kReference;
  if (name == "auto") return default_matmul_impl(dtype);
  fail("matmul must be auto, onednn, openblas or reference (got '{}')", name);
}

ComputeDType parse_compute_dtype(std::string_view name) {
  if (name == "fp32") return ComputeDType::kF32;
  if (name == "bf16") return ComputeDType::kBF16;
  fail("compute-dtype must be fp32 or bf16 (got '{}')", name);
}

std::string matmul_impl_name(MatmulImpl impl) {
  switch (impl) {
    case MatmulImpl::kReference: return "reference";
    case MatmulImpl::kOpenBlas: return "openblas";
    case MatmulImpl::kOneDnn: return "onednn";
  }
  return "?";
}

std::string compute_dtype_name(ComputeDType dtype) { return dtype == ComputeDType::kBF16 ? "bf16" : "fp32"; }

MatmulSettings matmul_settings_from(std::string_view impl, std::string_view dtype) {
  const ComputeDType compute = parse_compute_dtype(dtype);
  const MatmulSettings s{parse_matmul_impl(impl, compute), compute};
  STRATA_REQUIRE(s.impl != MatmulImpl::kOneDnn || onednn_available(),
                 "matmul onednn: this build has no oneDNN (install libdnnl-dev with scripts/setup and rebuild), use "
                 "openblas or auto");
  STRATA_REQUIRE(s.impl != MatmulImpl::kOneDnn || compute != ComputeDType::kBF16 || onednn_bf16_available(),
                 "matmul onednn with compute-dtype bf16: {} has no bf16 matmul on this CPU (it needs AVX-512); use "
                 "--matmul auto or openblas (bf16 inputs emulated, at fp32 speed) or --compute-dtype fp32",
                 onednn_description());
  return s;
}

std::string matmul_description() {
  const MatmulSettings s = matmul_settings();
  const std::string compute = s.dtype == ComputeDType::kBF16 ? "bf16 inputs, fp32 accumulation and output"
                                                             : "fp32";
  switch (s.impl) {
    case MatmulImpl::kReference: return fmt::format("reference loops, {}", compute);
    case MatmulImpl::kOpenBlas:
      if (s.dtype != ComputeDType::kBF16) return fmt::format("OpenBLAS sgemm, {}", compute);
      return fmt::format("OpenBLAS sgemm, {} (inputs rounded to bf16, then an fp32 product{})", compute,
                         onednn_available() && !onednn_bf16_available()
                             ? "; oneDNN has no bf16 matmul on this CPU, which needs AVX-512"
                             : "");
    case MatmulImpl::kOneDnn: return fmt::format("{}, {}", onednn_description(), compute);
  }
  return "?";
}

void gemm_reference(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc) {
#pragma omp parallel for schedule(static) if (static_cast<long>(m) * n * k > 32768)
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int p = 0; p < k; ++p) sum += at(a, ta, lda, i, p) * at(b, tb, ldb, p, j);
      float& out = c[static_cast<std::size_t>(i) * ldc + j];
      out = alpha * sum + (beta == 0.0f ? 0.0f : beta * out);
    }
  }
}

void gemm_bf16(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const bf16* a, int lda, const bf16* b,
               int ldb, float beta, float* c, int ldc) {
  STRATA_CHECK(beta == 0.0f || beta == 1.0f, "gemm takes beta 0 or 1 (got {})", beta);
  const MatmulSettings s = matmul_settings();
  if (s.impl == MatmulImpl::kOneDnn && onednn_bf16_available()) {
    onednn_gemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  thread_local std::vector<float> wa, wb;
  lda = widened_copy(wa, a, ta, m, k, lda);
  ldb = widened_copy(wb, b, tb, k, n, ldb);
  if (s.impl == MatmulImpl::kOneDnn) {
    onednn_gemm(false, ta, tb, m, n, k, alpha, wa.data(), lda, wb.data(), ldb, beta, c, ldc, {}, nullptr);
  } else {
    one_product(s.impl, ComputeDType::kF32, ta, tb, m, n, k, alpha, wa.data(), lda, wb.data(), ldb, beta, c, ldc);
  }
}

void gemm(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc, const GemmBatch& batch, const bf16* b_bf16) {
  STRATA_CHECK(beta == 0.0f || beta == 1.0f, "gemm takes beta 0 or 1 (got {})", beta);
  const MatmulSettings s = matmul_settings();
  if (s.impl == MatmulImpl::kOneDnn) {
    onednn_gemm(s.dtype == ComputeDType::kBF16, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch,
                s.dtype == ComputeDType::kBF16 ? b_bf16 : nullptr);
    return;
  }
  // The emulation rounds B itself: the same values as b_bf16 holds.
  const int count = batch.outer * batch.inner;
  if (count == 1) {
    one_product(s.impl, s.dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // One product per thread at a time (OpenBLAS runs single-threaded inside a parallel region).
#pragma omp parallel for schedule(static)
  for (int x = 0; x < count; ++x) {
    const int o = x / batch.inner, i = x % batch.inner;
    one_product(s.impl, s.dtype, ta, tb, m, n, k, alpha, a + o * batch.a_outer + i * batch.a_inner, lda,
                b + o * batch.b_outer + i * batch.b_inner, ldb, beta, c + o * batch.c_outer + i * batch.c_inner, ldc);
  }
}

}  // namespace strata::cpu
