// Fused causal attention: each tile of kQueryTile queries meets only the keys at or before its
// last query (fully masked tiles are never computed), in chunks of at most kKeyChunk keys with an
// online softmax, so scratch is a tile, not a T x T matrix. The backward recomputes each chunk's
// probabilities from the saved log-sum-exp. Products go through the matmul seam on dense per-head
// copies of q, k, v (and dout), made once per call: bf16 under bf16 compute, so no product
// converts its operands; softmax statistics stay fp32 throughout.
#include "model/cpu/flash_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "core/bf16.hpp"
#include "core/op_profile.hpp"
#include "core/vector_math.hpp"
#include "model/cpu/gemm.hpp"

namespace strata::cpu {

namespace {

// Tall tiles against narrow chunks: oneDNN's bf16 kernel ran a 256 x 64 x 64 product 2-3x faster
// than the 64 x 256 x 64 one of the same FLOPs (its blocking favours many rows and few columns),
// and at these sizes the products are most of attention's time. A tile's scores, probabilities and
// output (~200 KB with the backward's copies) stay in L2. A chunk on the diagonal is multiplied only
// with the queries that see some of its keys (rows from its first key on), so every computed row has
// a visible key and the masked waste is at most half a kKeyChunk square per chunk.
constexpr int kQueryTile = 256;
constexpr int kKeyChunk = 64;

// A tile computed in fp32 as the next product's operand: itself in fp32 compute, its bf16 copy
// (into `copy`) in bf16 compute.
const float* as_operand(std::vector<float>& /*copy*/, const float* tile, std::size_t /*n*/) { return tile; }
const bf16* as_operand(std::vector<bf16>& copy, const float* tile, std::size_t n) {
  copy.resize(n);
  fp32_to_bf16_serial(copy.data(), tile, n);
  return copy.data();
}

void copy_row(float* to, const float* from, int n) { std::copy(from, from + n, to); }
void copy_row(bf16* to, const float* from, int n) { fp32_to_bf16_serial(to, from, static_cast<std::size_t>(n)); }

void product(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
             int ldb, float beta, float* c, int ldc) {
  cpu::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, GemmBatch{});
}
void product(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const bf16* a, int lda, const bf16* b,
             int ldb, float beta, float* c, int ldc) {
  gemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The hs-wide column block of head h of x (rows of `ld`, starting at column `offset`), as dense
// (B, NH, T, hs) rows in the compute element type. It walks x's rows in order (each row's heads
// scattered to their blocks): walking a head's rows instead reads 256 bytes every 3C floats, which
// the hardware prefetcher does not follow, and the copies measured slower than the products.
template <class E>
void gather_heads(std::vector<E>& out, const float* x, int ld, int offset, int batch, int t, int heads, int hs) {
  out.resize(static_cast<std::size_t>(batch) * heads * t * hs);
  const long rows = static_cast<long>(batch) * t;
#pragma omp parallel for schedule(static)
  for (long row = 0; row < rows; ++row) {
    const long b = row / t, i = row % t;
    const float* from = x + row * ld + offset;
    for (long h = 0; h < heads; ++h) copy_row(out.data() + ((b * heads + h) * t + i) * hs, from + h * hs, hs);
  }
}

// max(init, x[0..n)) in 16 independent lanes: one running maximum is a chain of dependent
// compares the compiler will not vectorize, and it cost more than the exponentials.
inline float row_max(const float* x, int n, float init) {
  constexpr int kLanes = 16;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, init);
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) lanes[l] = x[j + l] > lanes[l] ? x[j + l] : lanes[l];
  }
  float m = init;
  for (const float lane : lanes) m = lane > m ? lane : m;
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// Keys of a chunk starting at c0 that query `row` (absolute) may see.
inline int visible_keys(int row, int c0, int nc) { return std::clamp(row + 1 - c0, 0, nc); }

// The first row of the tile starting at query r0 that sees a key of the chunk starting at c0 (the
// query at c0 sees it, the ones before see nothing); 0 off the diagonal.
inline int first_seeing_row(int r0, int c0) { return std::max(0, c0 - r0); }

template <class E>
void forward(float* out, float* lse, const float* qkv, int batch, int t, int c, int heads) {
  const int hs = c / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // The calling thread's copies (a thread_local names another object on each worker: the region
  // below reads them through these pointers).
  thread_local std::vector<E> q_heads, k_heads, v_heads;
  gather_heads(q_heads, qkv, 3 * c, 0, batch, t, heads, hs);
  gather_heads(k_heads, qkv, 3 * c, c, batch, t, heads, hs);
  gather_heads(v_heads, qkv, 3 * c, 2 * c, batch, t, heads, hs);
  const E* q = q_heads.data();
  const E* k = k_heads.data();
  const E* v = v_heads.data();
  const int tiles = (t + kQueryTile - 1) / kQueryTile;
  const long pairs = static_cast<long>(batch) * heads;
#pragma omp parallel
  {
    thread_local std::vector<float> s, o;
    thread_local std::vector<E> p;
    s.resize(static_cast<std::size_t>(kQueryTile) * kKeyChunk);
    o.resize(static_cast<std::size_t>(kQueryTile) * hs);
    float m[kQueryTile], l[kQueryTile];
    // The longest tiles (the last queries, which see the most keys) first, for the dynamic schedule.
#pragma omp for schedule(dynamic)
    for (long item = 0; item < pairs * tiles; ++item) {
      const int tile = tiles - 1 - static_cast<int>(item / pairs);
      const long bh = item % pairs;
      const int r0 = tile * kQueryTile, br = std::min(kQueryTile, t - r0), n = r0 + br;
      const E* qi = q + (bh * t + r0) * hs;
      const E* kb = k + bh * t * hs;
      const E* vb = v + bh * t * hs;
      std::fill(m, m + br, -std::numeric_limits<float>::infinity());
      std::fill(l, l + br, 0.0f);
      for (int c0 = 0; c0 < n; c0 += kKeyChunk) {
        const int nc = std::min(kKeyChunk, n - c0);
        const int first = first_seeing_row(r0, c0);  // rows before it see none of the chunk
        const int rows = br - first;
        product(Transpose::kNo, Transpose::kYes, rows, nc, hs, scale, qi + static_cast<long>(first) * hs, hs,
                kb + static_cast<long>(c0) * hs, hs, 0.0f, s.data(), nc);
        for (int i = first; i < br; ++i) {
          float* srow = s.data() + static_cast<std::size_t>(i - first) * nc;
          const int seen = visible_keys(r0 + i, c0, nc);
          const float mx = row_max(srow, seen, m[i]);
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int j = 0; j < seen; ++j) {
            const float e = fast_exp(srow[j] - mx);
            srow[j] = e;
            sum += e;
          }
          std::fill(srow + seen, srow + nc, 0.0f);
          if (c0 > 0) {  // rescale what earlier chunks summed to the new maximum
            const float correction = fast_exp(m[i] - mx);
            l[i] *= correction;
            float* orow = o.data() + static_cast<std::size_t>(i) * hs;
#pragma omp simd
            for (int d = 0; d < hs; ++d) orow[d] *= correction;
          }
          l[i] += sum;
          m[i] = mx;
        }
        const E* pe = as_operand(p, s.data(), static_cast<std::size_t>(rows) * nc);
        // The first chunk (c0 = 0) is seen by every row: it writes o whole, the later ones add.
        product(Transpose::kNo, Transpose::kNo, rows, hs, nc, 1.0f, pe, nc, vb + static_cast<long>(c0) * hs, hs,
                c0 == 0 ? 0.0f : 1.0f, o.data() + static_cast<std::size_t>(first) * hs, hs);
      }
      const long b = bh / heads, h = bh % heads;
      for (int i = 0; i < br; ++i) {
        const float inv = 1.0f / l[i];
        const float* orow = o.data() + static_cast<std::size_t>(i) * hs;
        float* dst = out + (b * t + r0 + i) * c + h * hs;
#pragma omp simd
        for (int d = 0; d < hs; ++d) dst[d] = orow[d] * inv;
        lse[bh * t + r0 + i] = m[i] + std::log(l[i]);
      }
    }
  }
}

template <class E>
void backward(float* dqkv, const float* dout, const float* out, const float* qkv, const float* lse, int batch, int t,
              int c, int heads) {
  const int hs = c / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  thread_local std::vector<E> q_heads, k_heads, v_heads, dout_heads;
  gather_heads(q_heads, qkv, 3 * c, 0, batch, t, heads, hs);
  gather_heads(k_heads, qkv, 3 * c, c, batch, t, heads, hs);
  gather_heads(v_heads, qkv, 3 * c, 2 * c, batch, t, heads, hs);
  gather_heads(dout_heads, dout, c, 0, batch, t, heads, hs);
  const E* q = q_heads.data();
  const E* k = k_heads.data();
  const E* v = v_heads.data();
  const E* dov = dout_heads.data();
  // D = rowsum(dO * O) per query: the softmax backward's correction, from the fp32 values.
  thread_local std::vector<float> dsum_rows;
  const long pairs = static_cast<long>(batch) * heads;
  dsum_rows.resize(static_cast<std::size_t>(pairs) * t);
  float* dsum = dsum_rows.data();
#pragma omp parallel for schedule(static)
  for (long line = 0; line < pairs * t; ++line) {
    const long b = line / (static_cast<long>(heads) * t), h = (line / t) % heads, i = line % t;
    const float* o = out + (b * t + i) * c + h * hs;
    const float* d = dout + (b * t + i) * c + h * hs;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int x = 0; x < hs; ++x) sum += o[x] * d[x];
    dsum[line] = sum;
  }
  const int tiles = (t + kQueryTile - 1) / kQueryTile;
  // One (batch, head) per task: its key and value gradients gather every query tile's share.
#pragma omp parallel
  {
    const std::size_t tile_size = static_cast<std::size_t>(kQueryTile) * kKeyChunk;
    thread_local std::vector<float> pr, dp, dq, dk, dv;
    thread_local std::vector<E> pt, ds;
    for (auto* x : {&pr, &dp}) x->resize(tile_size);
    dq.resize(static_cast<std::size_t>(kQueryTile) * hs);
    dk.resize(static_cast<std::size_t>(t) * hs);
    dv.resize(static_cast<std::size_t>(t) * hs);
#pragma omp for schedule(dynamic)
    for (long bh = 0; bh < pairs; ++bh) {
      std::fill(dk.begin(), dk.end(), 0.0f);
      std::fill(dv.begin(), dv.end(), 0.0f);
      const E* kb = k + bh * t * hs;
      const E* vb = v + bh * t * hs;
      const long b = bh / heads, h = bh % heads;
      for (int tile = 0; tile < tiles; ++tile) {
        const int r0 = tile * kQueryTile, br = std::min(kQueryTile, t - r0), n = r0 + br;
        const E* qi = q + (bh * t + r0) * hs;
        const E* doi = dov + (bh * t + r0) * hs;
        const float* lse_i = lse + bh * t + r0;
        const float* d_i = dsum + bh * t + r0;
        for (int c0 = 0; c0 < n; c0 += kKeyChunk) {
          const int nc = std::min(kKeyChunk, n - c0);
          const E* kc = kb + static_cast<long>(c0) * hs;
          const E* vc = vb + static_cast<long>(c0) * hs;
          const int first = first_seeing_row(r0, c0);
          const int rows = br - first;
          const E* qs = qi + static_cast<long>(first) * hs;
          const E* dos = doi + static_cast<long>(first) * hs;
          product(Transpose::kNo, Transpose::kYes, rows, nc, hs, scale, qs, hs, kc, hs, 0.0f, pr.data(), nc);
          product(Transpose::kNo, Transpose::kYes, rows, nc, hs, 1.0f, dos, hs, vc, hs, 0.0f, dp.data(), nc);
          // P from the saved log-sum-exp in place of the scores, dS = P (dP - D) in place of dP.
          for (int i = first; i < br; ++i) {
            float* prow = pr.data() + static_cast<std::size_t>(i - first) * nc;
            float* dsrow = dp.data() + static_cast<std::size_t>(i - first) * nc;
            const int seen = visible_keys(r0 + i, c0, nc);
            const float row_lse = lse_i[i], row_d = d_i[i];
#pragma omp simd
            for (int j = 0; j < seen; ++j) {
              const float pj = fast_exp(prow[j] - row_lse);
              prow[j] = pj;
              dsrow[j] = pj * (dsrow[j] - row_d);
            }
            std::fill(prow + seen, prow + nc, 0.0f);
            std::fill(dsrow + seen, dsrow + nc, 0.0f);
          }
          const E* pe = as_operand(pt, pr.data(), static_cast<std::size_t>(rows) * nc);
          const E* dse = as_operand(ds, dp.data(), static_cast<std::size_t>(rows) * nc);
          // dV_c += P^T dO_i, dQ_i += dS K_c / sqrt(hs), dK_c += dS^T Q_i / sqrt(hs); chunk 0 is
          // seen by every row, so it writes dQ_i whole.
          product(Transpose::kYes, Transpose::kNo, nc, hs, rows, 1.0f, pe, nc, dos, hs, 1.0f,
                  dv.data() + static_cast<long>(c0) * hs, hs);
          product(Transpose::kNo, Transpose::kNo, rows, hs, nc, scale, dse, nc, kc, hs, c0 == 0 ? 0.0f : 1.0f,
                  dq.data() + static_cast<std::size_t>(first) * hs, hs);
          product(Transpose::kYes, Transpose::kNo, nc, hs, rows, scale, dse, nc, qs, hs, 1.0f,
                  dk.data() + static_cast<long>(c0) * hs, hs);
        }
        for (int i = 0; i < br; ++i) {
          std::copy_n(dq.data() + static_cast<std::size_t>(i) * hs, hs, dqkv + (b * t + r0 + i) * 3 * c + h * hs);
        }
      }
      for (int i = 0; i < t; ++i) {
        float* row = dqkv + (b * t + i) * 3 * c + h * hs;
        std::copy_n(dk.data() + static_cast<std::size_t>(i) * hs, hs, row + c);
        std::copy_n(dv.data() + static_cast<std::size_t>(i) * hs, hs, row + 2 * c);
      }
    }
  }
}

bool bf16_compute() { return matmul_settings().dtype == ComputeDType::kBF16; }

// The causal products' FLOPs of one pass over all heads: each product is 2 hs per (query, key) pair
// with key <= query; the forward has two (S = QK^T, O = PV), the backward five (S again, dV, dP,
// dQ, dK).
double causal_product_flops(int batch, int seq_len, int channels, int products) {
  const double pairs = 0.5 * seq_len * (seq_len + 1.0);
  return 2.0 * products * batch * pairs * channels;
}

}  // namespace

void flash_attention_forward(float* out, float* lse, const float* qkv, int batch, int seq_len, int channels,
                             int heads) {
  // qkv read, out and the log-sum-exp written; the T x T matrix never reaches memory.
  const double rows = static_cast<double>(batch) * seq_len;
  const OpScope scope(Op::kAttentionForward, rows * (16.0 * channels + 4.0 * heads),
                      causal_product_flops(batch, seq_len, channels, 2));
  if (bf16_compute()) {
    forward<bf16>(out, lse, qkv, batch, seq_len, channels, heads);
  } else {
    forward<float>(out, lse, qkv, batch, seq_len, channels, heads);
  }
}

void flash_attention_backward(float* dqkv, const float* dout, const float* out, const float* qkv, const float* lse,
                              int batch, int seq_len, int channels, int heads) {
  // qkv, out, dout and the log-sum-exp read, dqkv written.
  const double rows = static_cast<double>(batch) * seq_len;
  const OpScope scope(Op::kAttentionBackward, rows * (32.0 * channels + 4.0 * heads),
                      causal_product_flops(batch, seq_len, channels, 5));
  if (bf16_compute()) {
    backward<bf16>(dqkv, dout, out, qkv, lse, batch, seq_len, channels, heads);
  } else {
    backward<float>(dqkv, dout, out, qkv, lse, batch, seq_len, channels, heads);
  }
}

}  // namespace strata::cpu
