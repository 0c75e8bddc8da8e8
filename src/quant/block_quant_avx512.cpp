// The AVX-512 (F, BW, VL) block quantization kernels: 16 lanes at a time, masked loads and stores
// for the tails, each result bit equal to the scalar reference in block_quant.cpp.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/block_quant_kernels.hpp"

#if defined(__x86_64__)

// Only these functions may use AVX-512: the build may target the x86-64 baseline, and
// block_quant.cpp calls in here only after checking the CPU. Nothing from the standard library is
// instantiated inside the region, so no AVX-512 copy of a shared inline function can leak out.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")
// GCC 12 flags the deliberately undefined pass-through operand inside nearly every AVX-512
// intrinsic (GCC bug 105593); the warning says nothing about this code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace strata::quant_detail {
namespace {

inline __mmask16 first16(std::size_t r) { return static_cast<__mmask16>((1u << r) - 1u); }  // r <= 16
inline __mmask32 first32(std::size_t r) {
  return r >= 32 ? static_cast<__mmask32>(0xFFFFFFFFu) : static_cast<__mmask32>((1u << r) - 1u);
}

// 16 elements widened to fp32 (bf16 exactly: its bits are the top half of an fp32). The masked
// forms read nothing outside the mask and give +0 there, which codes to 0.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const float* p, __mmask16 k) { return _mm512_maskz_loadu_ps(k, p); }
inline __m512 widen16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
inline __m512 load16(const std::uint16_t* p) {
  return widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load16(const std::uint16_t* p, __mmask16 k) { return widen16(_mm256_maskz_loadu_epi16(k, p)); }

// The largest magnitude's bit pattern (sign cleared; compared as unsigned integers).
inline std::uint32_t amax_bits(const float* x, std::size_t len) {
  const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0, m3 = m0;
  std::size_t i = 0;
  for (; i + 64 <= len; i += 64) {
    m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), abs));
    m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_loadu_si512(x + i + 16), abs));
    m2 = _mm512_max_epu32(m2, _mm512_and_si512(_mm512_loadu_si512(x + i + 32), abs));
    m3 = _mm512_max_epu32(m3, _mm512_and_si512(_mm512_loadu_si512(x + i + 48), abs));
  }
  for (; i + 16 <= len; i += 16) m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), abs));
  if (i < len) m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_maskz_loadu_epi32(first16(len - i), x + i), abs));
  return _mm512_reduce_max_epu32(_mm512_max_epu32(_mm512_max_epu32(m0, m1), _mm512_max_epu32(m2, m3)));
}

// Same on bf16: widening keeps the order, so the maximum is taken on the 16-bit patterns.
inline std::uint32_t amax_bits(const std::uint16_t* x, std::size_t len) {
  const __m512i abs = _mm512_set1_epi16(0x7FFF);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0, m3 = m0;
  std::size_t i = 0;
  for (; i + 128 <= len; i += 128) {
    m0 = _mm512_max_epu16(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), abs));
    m1 = _mm512_max_epu16(m1, _mm512_and_si512(_mm512_loadu_si512(x + i + 32), abs));
    m2 = _mm512_max_epu16(m2, _mm512_and_si512(_mm512_loadu_si512(x + i + 64), abs));
    m3 = _mm512_max_epu16(m3, _mm512_and_si512(_mm512_loadu_si512(x + i + 96), abs));
  }
  for (; i + 32 <= len; i += 32) m0 = _mm512_max_epu16(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), abs));
  if (i < len) m1 = _mm512_max_epu16(m1, _mm512_and_si512(_mm512_maskz_loadu_epi16(first32(len - i), x + i), abs));
  const __m512i m = _mm512_max_epu16(_mm512_max_epu16(m0, m1), _mm512_max_epu16(m2, m3));
  const __m512i pairs = _mm512_max_epu32(_mm512_and_si512(m, _mm512_set1_epi32(0xFFFF)), _mm512_srli_epi32(m, 16));
  return _mm512_reduce_max_epu32(pairs) << 16;
}

// round(x / s) in the current rounding mode (nearest-even, as nearbyint), clamped to [lo, hi].
// |x / s| stays below 2Q even for a subnormal s, so the conversion cannot overflow.
inline __m512i encode16(__m512 x, __m512 s, __m512i lo, __m512i hi) {
  const __m512i c = _mm512_cvtps_epi32(_mm512_div_ps(x, s));
  return _mm512_min_epi32(_mm512_max_epi32(c, lo), hi);
}

// Codes of elements 0-15 (a) and 16-31 (b) to 16 bytes, element 2k in the low nibble of byte k.
inline __m128i pack_nibbles(__m512i a, __m512i b) {
  const __m128i low = _mm_set1_epi16(0x000F), high = _mm_set1_epi16(0x00F0);
  // As 16-bit lanes each holds code 2k in its low byte and 2k+1 in its high byte.
  __m128i x = _mm512_cvtepi32_epi8(a), y = _mm512_cvtepi32_epi8(b);
  x = _mm_or_si128(_mm_and_si128(x, low), _mm_and_si128(_mm_srli_epi16(x, 4), high));
  y = _mm_or_si128(_mm_and_si128(y, low), _mm_and_si128(_mm_srli_epi16(y, 4), high));
  return _mm_packus_epi16(x, y);
}

// The second pass over a block (the divisions) reads from L1 and leaves memory idle, and the
// hardware prefetcher only runs ahead of demand loads; fetching what follows meanwhile overlaps the
// two. The distance is the next block, but at least 4 KiB so small blocks still cover the memory
// latency. A prefetch past the run is harmless (it never faults), hence the integer arithmetic.
template <class In>
inline void prefetch_ahead(const In* p, std::uint32_t block) {
  const std::uintptr_t bytes = std::uintptr_t{block} * sizeof(In);
  const std::uintptr_t ahead = bytes > 4096 ? bytes : 4096;
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(p) + ahead), _MM_HINT_T0);
}

template <class In>
void quantize(int q, std::uint32_t block, const In* in, std::size_t n, unsigned char* scales, unsigned char* codes) {
  const __m512i lo = _mm512_set1_epi32(-q), hi = _mm512_set1_epi32(q);
  for (std::size_t b = 0, start = 0; start < n; ++b, start += block) {
    const std::size_t len = n - start < block ? n - start : block;
    const In* x = in + start;
    const std::uint32_t m = amax_bits(x, len);
    float amax;
    std::memcpy(&amax, &m, sizeof amax);
    const float scale = amax / static_cast<float>(q);
    std::memcpy(scales + b * sizeof(float), &scale, sizeof scale);
    std::uint32_t sbits;
    std::memcpy(&sbits, &scale, sizeof sbits);
    const bool live = sbits != 0 && (sbits & 0x7F800000u) != 0x7F800000u;  // scale > 0 and finite
    const __m512 s = _mm512_set1_ps(scale);
    std::size_t i = 0;
    if (q == 127) {
      unsigned char* c = codes + start;
      if (!live) {
        std::memset(c, 0, len);
        continue;
      }
      for (; i + 16 <= len; i += 16) {
        prefetch_ahead(x + i, block);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(c + i), _mm512_cvtepi32_epi8(encode16(load16(x + i), s, lo, hi)));
      }
      if (i < len) {
        const __mmask16 k = first16(len - i);
        _mm512_mask_cvtepi32_storeu_epi8(c + i, k, encode16(load16(x + i, k), s, lo, hi));
      }
    } else {
      unsigned char* c = codes + start / 2;
      if (!live) {
        std::memset(c, 0, (len + 1) / 2);
        continue;
      }
      for (; i + 32 <= len; i += 32) {
        prefetch_ahead(x + i, block);
        prefetch_ahead(x + i + 16, block);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(c + i / 2),
                         pack_nibbles(encode16(load16(x + i), s, lo, hi), encode16(load16(x + i + 16), s, lo, hi)));
      }
      if (i < len) {
        // Lanes past the run read as 0 and code to 0: an odd run's last high nibble is 0.
        const std::size_t r = len - i;
        const __m128i v = pack_nibbles(encode16(load16(x + i, first16(r < 16 ? r : 16)), s, lo, hi),
                                       encode16(load16(x + i + 16, first16(r > 16 ? r - 16 : 0)), s, lo, hi));
        _mm_mask_storeu_epi8(c + i / 2, first16((r + 1) / 2), v);
      }
    }
  }
}

// to_bf16 (core/bf16.hpp) on 16 lanes: round to nearest even, a NaN keeps its top bits plus 0x40.
// kMayBeNan = false drops the NaN test, exact when no lane is NaN.
template <bool kMayBeNan>
inline __m256i to_bf16_16(__m512 v) {
  const __m512i b = _mm512_castps_si512(v);
  const __m512i top = _mm512_srli_epi32(b, 16);
  const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), _mm512_and_si512(top, _mm512_set1_epi32(1)));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(b, bias), 16);
  if (!kMayBeNan) return _mm512_cvtepi32_epi16(rounded);
  const __mmask16 nan =
      _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(top, _mm512_set1_epi32(0x40))));
}

// Where decoded values go: the full form writes 16 lanes, the masked form only those in k.
struct StoreF32 {
  float* out;
  void full(std::size_t i, __m512 v) const { _mm512_storeu_ps(out + i, v); }
  void part(std::size_t i, __mmask16 k, __m512 v) const { _mm512_mask_storeu_ps(out + i, k, v); }
};
template <bool kMayBeNan>
struct StoreBf16 {
  std::uint16_t* out;
  void full(std::size_t i, __m512 v) const {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), to_bf16_16<kMayBeNan>(v));
  }
  void part(std::size_t i, __mmask16 k, __m512 v) const {
    _mm256_mask_storeu_epi16(out + i, k, to_bf16_16<kMayBeNan>(v));
  }
};
// The reference's nan_ordered_add: the sum, then the accumulator's NaN (else the decoded one),
// quieted, put back explicitly, whatever operand order the compiler gave the add.
inline __m512 nan_ordered_add(__m512 acc, __m512 v) {
  const __m512i quiet = _mm512_set1_epi32(0x00400000);
  __m512i r = _mm512_castps_si512(_mm512_add_ps(acc, v));
  r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_castps_si512(v), quiet);
  r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q), _mm512_castps_si512(acc), quiet);
  return _mm512_castsi512_ps(r);
}

struct AddF32 {
  float* accum;
  // accum + decoded: the product was rounded on its own before this add.
  void full(std::size_t i, __m512 v) const {
    _mm512_storeu_ps(accum + i, nan_ordered_add(_mm512_loadu_ps(accum + i), v));
  }
  void part(std::size_t i, __mmask16 k, __m512 v) const {
    _mm512_mask_storeu_ps(accum + i, k, nan_ordered_add(_mm512_maskz_loadu_ps(k, accum + i), v));
  }
};

inline __m512 decode_i8(__m128i bytes, __m512 s) {
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)), s);
}

// 16 bytes of nibbles to the signed codes of elements 0-15 (lo) and 16-31 (hi), one per byte.
inline void unpack_nibbles(__m128i v, __m128i& lo, __m128i& hi) {
  const __m128i mask = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  const __m128i even = _mm_and_si128(v, mask), odd = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
  // (n ^ 8) - 8 sign-extends a 4-bit two's complement value.
  lo = _mm_sub_epi8(_mm_xor_si128(_mm_unpacklo_epi8(even, odd), eight), eight);
  hi = _mm_sub_epi8(_mm_xor_si128(_mm_unpackhi_epi8(even, odd), eight), eight);
}

// Block elements [start, start + len), codes from c (the block's first code byte).
template <class Sink>
void dequantize_block(int q, const unsigned char* c, __m512 s, std::size_t start, std::size_t len, Sink sink) {
  std::size_t i = 0;
  if (q == 127) {
    for (; i + 64 <= len; i += 64) {
      const __m512i v = _mm512_loadu_si512(c + i);
      sink.full(start + i, decode_i8(_mm512_castsi512_si128(v), s));
      sink.full(start + i + 16, decode_i8(_mm512_extracti32x4_epi32(v, 1), s));
      sink.full(start + i + 32, decode_i8(_mm512_extracti32x4_epi32(v, 2), s));
      sink.full(start + i + 48, decode_i8(_mm512_extracti32x4_epi32(v, 3), s));
    }
    for (; i + 16 <= len; i += 16)
      sink.full(start + i, decode_i8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + i)), s));
    if (i < len) {
      const __mmask16 k = first16(len - i);
      sink.part(start + i, k, decode_i8(_mm_maskz_loadu_epi8(k, c + i), s));
    }
  } else {
    __m128i lo, hi;
    for (; i + 32 <= len; i += 32) {
      unpack_nibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + i / 2)), lo, hi);
      sink.full(start + i, decode_i8(lo, s));
      sink.full(start + i + 16, decode_i8(hi, s));
    }
    if (i < len) {
      const std::size_t r = len - i;
      unpack_nibbles(_mm_maskz_loadu_epi8(first16((r + 1) / 2), c + i / 2), lo, hi);
      sink.part(start + i, first16(r < 16 ? r : 16), decode_i8(lo, s));
      sink.part(start + i + 16, first16(r > 16 ? r - 16 : 0), decode_i8(hi, s));
    }
  }
}

// A finite scale times a code is never NaN, so only blocks with a non-finite scale go to
// nan_sink (the bf16 store that tests for NaN; the same sink for the others).
template <class Sink, class NanSink>
void dequantize(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes, std::size_t n,
                Sink sink, NanSink nan_sink) {
  const std::size_t shift = q == 127 ? 0 : 1;
  for (std::size_t b = 0, start = 0; start < n; ++b, start += block) {
    const std::size_t len = n - start < block ? n - start : block;
    std::uint32_t sbits;
    std::memcpy(&sbits, scales + b * sizeof(float), sizeof sbits);
    const __m512 s = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(sbits)));
    const unsigned char* c = codes + (start >> shift);
    if ((sbits & 0x7F800000u) != 0x7F800000u) {
      dequantize_block(q, c, s, start, len, sink);
    } else {
      dequantize_block(q, c, s, start, len, nan_sink);
    }
  }
}

void quantize_f32(int q, std::uint32_t block, const float* in, std::size_t n, unsigned char* scales,
                  unsigned char* codes) {
  quantize(q, block, in, n, scales, codes);
}
void quantize_bf16(int q, std::uint32_t block, const std::uint16_t* in, std::size_t n, unsigned char* scales,
                   unsigned char* codes) {
  quantize(q, block, in, n, scales, codes);
}
void dequantize_f32(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                    std::size_t n, float* out) {
  dequantize(q, block, scales, codes, n, StoreF32{out}, StoreF32{out});
}
void dequantize_bf16(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                     std::size_t n, std::uint16_t* out) {
  dequantize(q, block, scales, codes, n, StoreBf16<false>{out}, StoreBf16<true>{out});
}
void dequantize_add(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                    std::size_t n, float* accum) {
  dequantize(q, block, scales, codes, n, AddF32{accum}, AddF32{accum});
}

}  // namespace

const Kernels kAvx512Kernels = {quantize_f32, quantize_bf16, dequantize_f32, dequantize_bf16, dequantize_add};

}  // namespace strata::quant_detail

#pragma GCC diagnostic pop
#pragma GCC pop_options

#endif  // __x86_64__
