// The matmul seam: every matrix product of the model (linear layers forward and backward, the
// tied LM head, attention's QK^T and PV as batched products) goes through gemm(), to one of three
// implementations chosen for the process: the plain reference loops (the definition the others
// are checked against), OpenBLAS, or oneDNN; with fp32 inputs, or bf16 inputs (rounded to nearest
// even), fp32 accumulation and an fp32 result (--compute-dtype bf16, in the manner of autocast).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/bf16.hpp"
#include "core/blas.hpp"

namespace strata::cpu {

enum class MatmulImpl { kReference, kOpenBlas, kOneDnn };
enum class ComputeDType { kF32, kBF16 };

struct MatmulSettings {
  MatmulImpl impl = MatmulImpl::kOpenBlas;  // the process default is default_matmul_impl()
  ComputeDType dtype = ComputeDType::kF32;
};

// The process's settings (set before any product; read by every gemm).
void set_matmul(MatmulSettings settings);
MatmulSettings matmul_settings();

// Whether this build has oneDNN (found at configure time); whether its bf16 matmul runs on this
// CPU (it needs AVX-512); and the default for a compute dtype: oneDNN where it can, else OpenBLAS.
bool onednn_available();
bool onednn_bf16_available();
MatmulImpl default_matmul_impl(ComputeDType dtype = ComputeDType::kF32);

// "onednn", "openblas", "reference" or "auto" (the default for `dtype`); "fp32", "bf16". Unknown
// names are refused with a sentence.
MatmulImpl parse_matmul_impl(std::string_view name, ComputeDType dtype = ComputeDType::kF32);
ComputeDType parse_compute_dtype(std::string_view name);
std::string matmul_impl_name(MatmulImpl impl);
std::string compute_dtype_name(ComputeDType dtype);
// The settings the flags --matmul and --compute-dtype name, checked against this build and CPU.
MatmulSettings matmul_settings_from(std::string_view impl, std::string_view dtype);

// What runs the products, e.g. "oneDNN 2.6.3, ISA avx512_core_amx, bf16 inputs with fp32
// accumulation" (printed at start beside the BLAS line).
std::string matmul_description();

// Several products of the same shape at regular offsets: for o < outer, i < inner the product of
// A + o*a_outer + i*a_inner and B + o*b_outer + i*b_inner into C + o*c_outer + i*c_inner (in
// elements); attention's (batch, head) pairs.
struct GemmBatch {
  int outer = 1, inner = 1;
  std::ptrdiff_t a_outer = 0, a_inner = 0, b_outer = 0, b_inner = 0, c_outer = 0, c_inner = 0;
};

// C(m x n) = alpha * op(A)(m x k) * op(B)(k x n) + beta * C, row-major with leading dimensions,
// for each product of `batch`. beta is 0 or 1 (a sum into C). b_bf16, where given, is B already
// in bf16 (to_bf16 of each element, same layout and ldb): bf16 compute then reads it instead of
// converting B, which is how a bf16 working copy of the weights feeds the products.
void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc, const GemmBatch& batch = {},
          const bf16* b_bf16 = nullptr);

// One product whose operands are already bf16 (same layouts as gemm's A and B): for kernels that
// convert an operand once and use it in several products (fused attention's tiles, on the calling
// thread inside their own parallel region; the linear backward's two products of one dout, on
// the whole team). oneDNN runs it natively; the
// reference and OpenBLAS paths widen the operands to fp32 (exactly) and multiply in fp32.
void gemm_bf16(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const bf16* a, int lda,
               const bf16* b, int ldb, float beta, float* c, int ldc);

// The reference implementation itself (plain loops, fp32 accumulation in k order), for tests.
void gemm_reference(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace strata::cpu
