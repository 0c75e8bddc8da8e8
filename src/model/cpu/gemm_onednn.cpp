// oneDNN products: a single fp32 product goes to dnnl_sgemm (its kernels keep their rate for every
// transpose, where the matmul primitive halves on some strided layouts); batched fp32 products and
// every bf16 product go to matmul primitives, cached by everything that shapes them. bf16 operands
// are first converted into dense scratch in their stored orientation (the conversion a bf16
// compute mode pays per product).
#include "model/cpu/gemm_onednn.hpp"

#include "core/error.hpp"

#ifdef STRATA_HAVE_ONEDNN

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "core/bf16.hpp"

namespace strata::cpu {

namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// What one operand looks like to the primitive: op(X)'s rows x cols with the strides of X, and
// the batch strides in front when there is a batch.
dnnl::memory::desc operand(dt type, bool batched, const GemmBatch& batch, std::ptrdiff_t outer, std::ptrdiff_t inner,
                           Transpose t, int rows, int cols, int ld) {
  const dnnl::memory::dim r = t == Transpose::kNo ? ld : 1, c = t == Transpose::kNo ? 1 : ld;
  if (!batched) return dnnl::memory::desc(dims{rows, cols}, type, dims{r, c});
  return dnnl::memory::desc(dims{batch.outer, batch.inner, rows, cols}, type, dims{outer, inner, r, c});
}

using Key = std::tuple<bool, int, int, int, int, int, int, int, int, int, int, std::ptrdiff_t, std::ptrdiff_t,
                       std::ptrdiff_t, std::ptrdiff_t, std::ptrdiff_t, std::ptrdiff_t, float, float>;

struct Primitive {
  dnnl::matmul matmul;
  dnnl::memory::desc src, weights, dst, scratchpad;
};

std::mutex g_cache_mutex;
std::map<Key, Primitive>& cache() {
  static std::map<Key, Primitive> primitives;
  return primitives;
}

// Each product's operand as dense bf16, one block after another in (outer, inner) order: the
// stored block (rows x cols as stored, leading dimension ld), or with `upright` op(X) itself,
// transposing as it converts. oneDNN 2.6 has no AMX kernel for a batched bf16 product whose first
// operand is transposed (it falls back to a gemm 5-7x slower), so that one is handed over upright.
void to_dense_bf16(std::vector<bf16>& out, const float* x, const GemmBatch& batch, std::ptrdiff_t outer,
                   std::ptrdiff_t inner, Transpose t, int rows_of_op, int cols_of_op, int ld, bool upright = false) {
  const bool transposing = upright && t == Transpose::kYes;
  const int rows = t == Transpose::kNo || transposing ? rows_of_op : cols_of_op;
  const int cols = t == Transpose::kNo || transposing ? cols_of_op : rows_of_op;
  const std::size_t block = static_cast<std::size_t>(rows) * cols;
  const int count = batch.outer * batch.inner;
  out.resize(block * count);
  if (count == 1 && ld == cols && !transposing) {  // one dense block: split evenly in runs of 4096
    constexpr std::size_t kRun = 4096;
    const long runs = static_cast<long>((block + kRun - 1) / kRun);
#pragma omp parallel for schedule(static) if (runs > 4)
    for (long run = 0; run < runs; ++run) {
      const std::size_t begin = static_cast<std::size_t>(run) * kRun;
      fp32_to_bf16_serial(out.data() + begin, x + begin, std::min(kRun, block - begin));
    }
    return;
  }
  const long lines = static_cast<long>(count) * rows;
#pragma omp parallel for schedule(static) if (block * count > 16384)
  for (long line = 0; line < lines; ++line) {
    const int e = static_cast<int>(line / rows), r = static_cast<int>(line % rows);
    const float* base = x + (e / batch.inner) * outer + (e % batch.inner) * inner;
    bf16* dst = out.data() + e * block + static_cast<std::size_t>(r) * cols;
    if (transposing) {
      for (int j = 0; j < cols; ++j) dst[j] = to_bf16(base[static_cast<std::ptrdiff_t>(j) * ld + r]);
    } else {
      fp32_to_bf16_serial(dst, base + static_cast<std::ptrdiff_t>(r) * ld, cols);
    }
  }
}

// Copies each product's m x n result block from one batch layout to another (the c strides of
// each GemmBatch, with its own leading dimension).
void copy_blocks(float* to, const GemmBatch& to_layout, int to_ld, const float* from, const GemmBatch& from_layout,
                 int from_ld, int m, int n) {
  const long lines = static_cast<long>(to_layout.outer) * to_layout.inner * m;
#pragma omp parallel for schedule(static) if (lines * n > 16384)
  for (long line = 0; line < lines; ++line) {
    const int e = static_cast<int>(line / m), r = static_cast<int>(line % m);
    const int o = e / to_layout.inner, i = e % to_layout.inner;
    float* dst = to + o * to_layout.c_outer + i * to_layout.c_inner + static_cast<std::ptrdiff_t>(r) * to_ld;
    const float* src = from + o * from_layout.c_outer + i * from_layout.c_inner + static_cast<std::ptrdiff_t>(r) * from_ld;
    std::copy(src, src + n, dst);
  }
}

// Runs the matmul primitive for this shape and these strides (made on first use, then cached).
void run_matmul(bool bf16_inputs, Transpose ta, Transpose tb, int m, int n, int k, float alpha, const void* a_data,
                int lda, const void* b_data, int ldb, float beta, float* c_data, int ldc_used, bool batched,
                const GemmBatch& in, const GemmBatch& out) {
  const Key key{bf16_inputs, static_cast<int>(ta), static_cast<int>(tb), m, n, k, lda, ldb, ldc_used, in.outer,
                in.inner, in.a_outer, in.a_inner, in.b_outer, in.b_inner, out.c_outer, out.c_inner, alpha, beta};
  Primitive p;
  {
    const std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto it = cache().find(key);
    if (it == cache().end()) {
      const dt type = bf16_inputs ? dt::bf16 : dt::f32;
      Primitive made;
      made.src = operand(type, batched, in, in.a_outer, in.a_inner, ta, m, k, lda);
      made.weights = operand(type, batched, in, in.b_outer, in.b_inner, tb, k, n, ldb);
      made.dst = operand(dt::f32, batched, out, out.c_outer, out.c_inner, Transpose::kNo, m, n, ldc_used);
      // The caller's scratchpad, not the library's: the library's is shared by every primitive in
      // this oneDNN build (no concurrent execution), and fused attention runs products on every
      // thread of a parallel region at once.
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
      if (beta != 0.0f) {
        dnnl::post_ops ops;
        ops.append_sum(beta);
        attr.set_post_ops(ops);
      }
      const dnnl::matmul::desc desc(made.src, made.weights, made.dst);
      const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
      made.matmul = dnnl::matmul(pd);
      made.scratchpad = pd.scratchpad_desc();
      it = cache().emplace(key, std::move(made)).first;
    }
    p = it->second;
  }
  dnnl::engine& engine = cpu_engine();
  dnnl::memory src(p.src, engine, const_cast<void*>(a_data));
  dnnl::memory weights(p.weights, engine, const_cast<void*>(b_data));
  dnnl::memory dst(p.dst, engine, c_data);
  // Grown to the largest any primitive asked for, on a 64-byte boundary (oneDNN's memory alignment).
  thread_local std::vector<std::byte> scratch;
  scratch.resize(std::max(scratch.size(), p.scratchpad.get_size() + 64));
  void* base = scratch.data();
  std::size_t room = scratch.size();
  dnnl::memory scratchpad(p.scratchpad, engine, std::align(64, p.scratchpad.get_size(), base, room));
  thread_local dnnl::stream stream(engine);
  p.matmul.execute(stream, {{DNNL_ARG_SRC, src},
                            {DNNL_ARG_WEIGHTS, weights},
                            {DNNL_ARG_DST, dst},
                            {DNNL_ARG_SCRATCHPAD, scratchpad}});
  stream.wait();
}

}  // namespace

std::string onednn_description() {
  const dnnl_version_t* v = dnnl_version();
  const char* isa = "?";
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: isa = "sse41"; break;
    case dnnl::cpu_isa::avx: isa = "avx"; break;
    case dnnl::cpu_isa::avx2: isa = "avx2"; break;
    case dnnl::cpu_isa::avx2_vnni: isa = "avx2_vnni"; break;
    case dnnl::cpu_isa::avx512_core: isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl::cpu_isa::avx512_core_amx: isa = "avx512_core_amx"; break;
    default: break;
  }
  return fmt::format("oneDNN {}.{}.{}, ISA {}", v->major, v->minor, v->patch, isa);
}

void onednn_gemm(bool bf16_inputs, Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a,
                 int lda, const float* b, int ldb, float beta, float* c, int ldc, const GemmBatch& batch,
                 const bf16* b_bf16) {
  const bool batched = batch.outer * batch.inner > 1;
  if (!bf16_inputs && !batched) {
    const dnnl_status_t status = dnnl_sgemm(ta == Transpose::kNo ? 'N' : 'T', tb == Transpose::kNo ? 'N' : 'T', m, n,
                                            k, alpha, a, lda, b, ldb, beta, c, ldc);
    STRATA_CHECK(status == dnnl_success, "dnnl_sgemm failed (status {}) on {} x {} x {}", static_cast<int>(status), m,
                 n, k);
    return;
  }
  GemmBatch in = batch;  // the operands' batch strides as the primitive sees them
  const void* a_data = a;
  const void* b_data = b;
  if (bf16_inputs) {
    thread_local std::vector<bf16> ra, rb;
    to_dense_bf16(ra, a, batch, batch.a_outer, batch.a_inner, ta, m, k, lda, batched);
    if (batched) ta = Transpose::kNo;
    lda = ta == Transpose::kNo ? k : m;
    in.a_inner = static_cast<std::ptrdiff_t>(m) * k;
    in.a_outer = in.a_inner * batch.inner;
    a_data = ra.data();
    if (b_bf16 != nullptr) {
      b_data = b_bf16;  // the working copy, in B's own layout: nothing to convert
    } else {
      to_dense_bf16(rb, b, batch, batch.b_outer, batch.b_inner, tb, k, n, ldb);
      ldb = tb == Transpose::kNo ? n : k;
      in.b_inner = static_cast<std::ptrdiff_t>(k) * n;
      in.b_outer = in.b_inner * batch.inner;
      b_data = rb.data();
    }
  }
  // A batched bf16 product into a strided result (attention's heads written into their columns) has
  // no AMX kernel in oneDNN 2.6 either: it computes into dense scratch, copied out after.
  const std::size_t c_block = static_cast<std::size_t>(m) * n;
  const bool scatter = bf16_inputs && batched &&
                       (ldc != n || batch.c_inner != static_cast<std::ptrdiff_t>(c_block) ||
                        batch.c_outer != batch.c_inner * batch.inner);
  float* c_data = c;
  GemmBatch out = batch;
  int ldc_used = ldc;
  thread_local std::vector<float> rc;
  if (scatter) {
    rc.resize(c_block * batch.outer * batch.inner);
    ldc_used = n;
    out.c_inner = static_cast<std::ptrdiff_t>(c_block);
    out.c_outer = out.c_inner * batch.inner;
    c_data = rc.data();
    if (beta != 0.0f) copy_blocks(rc.data(), out, n, c, batch, ldc, m, n);
  }
  run_matmul(bf16_inputs, ta, tb, m, n, k, alpha, a_data, lda, b_data, ldb, beta, c_data, ldc_used, batched, in, out);
  if (scatter) copy_blocks(c, batch, ldc, rc.data(), out, n, m, n);
}

void onednn_gemm_bf16(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const bf16* a, int lda,
                      const bf16* b, int ldb, float beta, float* c, int ldc) {
  run_matmul(true, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, false, {}, {});
}

}  // namespace strata::cpu

namespace strata::cpu {
bool onednn_available() { return true; }

// oneDNN 2.6 has bf16 matmul kernels only from AVX-512 up (avx512_core; AMX and avx512_core_bf16
// natively, plain AVX-512 by conversion); on an AVX2 CPU, or under ONEDNN_MAX_CPU_ISA=AVX2, no
// implementation accepts bf16 and making the primitive fails. Asked once, of a small product.
bool onednn_bf16_available() {
  static const bool available = [] {
    try {
      const dnnl::memory::desc a(dims{16, 16}, dt::bf16, dims{16, 1}), c(dims{16, 16}, dt::f32, dims{16, 1});
      const dnnl::matmul::desc desc(a, a, c);
      const dnnl::matmul::primitive_desc pd(desc, cpu_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
}
}  // namespace strata::cpu

#else

namespace strata::cpu {

bool onednn_available() { return false; }
bool onednn_bf16_available() { return false; }

std::string onednn_description() { return "oneDNN (not in this build)"; }

void onednn_gemm(bool, Transpose, Transpose, int, int, int, float, const float*, int, const float*, int, float, float*,
                 int, const GemmBatch&, const bf16*) {
  STRATA_CHECK(false, "oneDNN was not found when Strata was built");
}

void onednn_gemm_bf16(Transpose, Transpose, int, int, int, float, const bf16*, int, const bf16*, int, float, float*,
                      int) {
  STRATA_CHECK(false, "oneDNN was not found when Strata was built");
}

}  // namespace strata::cpu

#endif
