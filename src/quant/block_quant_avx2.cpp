// The AVX2 block quantization kernels: 8 lanes at a time, 32 elements per step; a block's last
// partial step goes through a zero-padded copy so it runs the same code. Bits equal the scalar
// reference in block_quant.cpp.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/block_quant_kernels.hpp"

#if defined(__x86_64__)

// Only these functions may use AVX2: the build may target the x86-64 baseline, and
// block_quant.cpp calls in here only after checking the CPU. Nothing from the standard library is
// instantiated inside the region, so no AVX2 copy of a shared inline function can leak out. The
// target names no FMA, and the file is built with -ffp-contract=off besides.
#pragma GCC push_options
#pragma GCC target("avx2")

namespace strata::quant_detail {
namespace {

constexpr std::size_t kStep = 32;  // elements per step: 32 int8 codes fill one ymm, int4 one xmm

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
// bf16 widens exactly: its bits are the top half of an fp32.
inline __m256 load8(const std::uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline std::uint32_t hmax_epu32(__m256i m) {
  __m128i x = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  x = _mm_max_epu32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
  x = _mm_max_epu32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)));
  return static_cast<std::uint32_t>(_mm_cvtsi128_si32(x));
}

// The largest magnitude's bit pattern (sign cleared; compared as unsigned integers).
inline std::uint32_t amax_bits(const float* x, std::size_t len) {
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
  std::size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    const auto* p = reinterpret_cast<const __m256i*>(x + i);
    m0 = _mm256_max_epu32(m0, _mm256_and_si256(_mm256_loadu_si256(p), abs));
    m1 = _mm256_max_epu32(m1, _mm256_and_si256(_mm256_loadu_si256(p + 1), abs));
    m2 = _mm256_max_epu32(m2, _mm256_and_si256(_mm256_loadu_si256(p + 2), abs));
    m3 = _mm256_max_epu32(m3, _mm256_and_si256(_mm256_loadu_si256(p + 3), abs));
  }
  std::uint32_t m = hmax_epu32(_mm256_max_epu32(_mm256_max_epu32(m0, m1), _mm256_max_epu32(m2, m3)));
  for (; i < len; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    bits &= 0x7FFFFFFFu;
    m = bits > m ? bits : m;
  }
  return m;
}

// Same on bf16: widening keeps the order, so the maximum is taken on the 16-bit patterns.
inline std::uint32_t amax_bits(const std::uint16_t* x, std::size_t len) {
  const __m256i abs = _mm256_set1_epi16(0x7FFF);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0;
  std::size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    const auto* p = reinterpret_cast<const __m256i*>(x + i);
    m0 = _mm256_max_epu16(m0, _mm256_and_si256(_mm256_loadu_si256(p), abs));
    m1 = _mm256_max_epu16(m1, _mm256_and_si256(_mm256_loadu_si256(p + 1), abs));
  }
  const __m256i m16 = _mm256_max_epu16(m0, m1);
  const __m256i pairs =
      _mm256_max_epu32(_mm256_and_si256(m16, _mm256_set1_epi32(0xFFFF)), _mm256_srli_epi32(m16, 16));
  std::uint32_t m = hmax_epu32(pairs);
  for (; i < len; ++i) {
    const std::uint32_t bits = x[i] & 0x7FFFu;
    m = bits > m ? bits : m;
  }
  return m << 16;
}

// round(x / s) in the current rounding mode (nearest-even, as nearbyint), clamped to [lo, hi].
// |x / s| stays below 2Q even for a subnormal s, so the conversion cannot overflow.
inline __m256i encode8(__m256 x, __m256 s, __m256i lo, __m256i hi) {
  const __m256i c = _mm256_cvtps_epi32(_mm256_div_ps(x, s));
  return _mm256_min_epi32(_mm256_max_epi32(c, lo), hi);
}

// The int8 codes of 32 elements, in element order.
template <class In>
inline __m256i encode32(const In* x, __m256 s, __m256i lo, __m256i hi) {
  const __m256i c0 = encode8(load8(x), s, lo, hi), c1 = encode8(load8(x + 8), s, lo, hi);
  const __m256i c2 = encode8(load8(x + 16), s, lo, hi), c3 = encode8(load8(x + 24), s, lo, hi);
  // The packs work within 128-bit lanes, leaving 4-byte groups in the order c0 c1 c2 c3 (low
  // halves) then c0 c1 c2 c3 (high halves); the permutation puts each c back together.
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(c0, c1), _mm256_packs_epi32(c2, c3));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// 32 int8 codes to 16 bytes, element 2k in the low nibble of byte k.
inline __m128i pack_nibbles(__m256i codes) {
  // As 16-bit lanes each holds code 2k in its low byte and 2k+1 in its high byte.
  const __m256i w = _mm256_or_si256(_mm256_and_si256(codes, _mm256_set1_epi16(0x000F)),
                                    _mm256_and_si256(_mm256_srli_epi16(codes, 4), _mm256_set1_epi16(0x00F0)));
  return _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

// One step of 32 elements: 32 bytes of int8 codes or 16 of int4.
template <class In>
inline void encode_step(int q, const In* x, __m256 s, __m256i lo, __m256i hi, unsigned char* out) {
  const __m256i c = encode32(x, s, lo, hi);
  if (q == 127) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), c);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), pack_nibbles(c));
  }
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
  const __m256i lo = _mm256_set1_epi32(-q), hi = _mm256_set1_epi32(q);
  const std::size_t shift = q == 127 ? 0 : 1;  // element index to code byte
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
    unsigned char* c = codes + (start >> shift);
    if (sbits == 0 || (sbits & 0x7F800000u) == 0x7F800000u) {  // zero or non-finite: all codes 0
      std::memset(c, 0, (len + shift) >> shift);
      continue;
    }
    const __m256 s = _mm256_set1_ps(scale);
    std::size_t i = 0;
    for (; i + kStep <= len; i += kStep) {
      for (std::size_t line = 0; line < kStep * sizeof(In); line += 64)
        prefetch_ahead(x + i + line / sizeof(In), block);
      encode_step(q, x + i, s, lo, hi, c + (i >> shift));
    }
    if (i < len) {
      // Padding zeros code to 0: an odd run's last high nibble is 0.
      In pad[kStep] = {};
      unsigned char out[kStep];
      std::memcpy(pad, x + i, (len - i) * sizeof(In));
      encode_step(q, pad, s, lo, hi, out);
      std::memcpy(c + (i >> shift), out, (len - i + shift) >> shift);
    }
  }
}

// to_bf16 (core/bf16.hpp) on 8 lanes, each result in the low half of its 32-bit lane: round to
// nearest even, a NaN keeps its top bits plus 0x40. kMayBeNan = false drops the NaN test, exact
// when no lane is NaN.
template <bool kMayBeNan>
inline __m256i to_bf16_lanes(__m256 v) {
  const __m256i b = _mm256_castps_si256(v);
  const __m256i top = _mm256_srli_epi32(b, 16);
  const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), _mm256_and_si256(top, _mm256_set1_epi32(1)));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(b, bias), 16);
  if (!kMayBeNan) return rounded;
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(top, _mm256_set1_epi32(0x40)), nan);
}

// Where 16 decoded values (a: the first 8, b: the next 8) go.
struct StoreF32 {
  using T = float;
  static void put(float* d, __m256 a, __m256 b) {
    _mm256_storeu_ps(d, a);
    _mm256_storeu_ps(d + 8, b);
  }
};
template <bool kMayBeNan>
struct StoreBf16 {
  using T = std::uint16_t;
  static void put(std::uint16_t* d, __m256 a, __m256 b) {
    // Each lane is <= 0xFFFF, so the unsigned pack is exact; it works per 128-bit half, and the
    // permutation restores the element order.
    const __m256i packed = _mm256_packus_epi32(to_bf16_lanes<kMayBeNan>(a), to_bf16_lanes<kMayBeNan>(b));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0)));
  }
};
// The reference's nan_ordered_add: the sum, then the accumulator's NaN (else the decoded one),
// quieted, put back explicitly, whatever operand order the compiler gave the add.
inline __m256 nan_ordered_add(__m256 acc, __m256 v) {
  const __m256 quiet = _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000));
  __m256 r = _mm256_add_ps(acc, v);
  r = _mm256_blendv_ps(r, _mm256_or_ps(v, quiet), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm256_blendv_ps(r, _mm256_or_ps(acc, quiet), _mm256_cmp_ps(acc, acc, _CMP_UNORD_Q));
}

struct AddF32 {
  using T = float;
  // accum + decoded: the product was rounded on its own before this add.
  static void put(float* d, __m256 a, __m256 b) {
    _mm256_storeu_ps(d, nan_ordered_add(_mm256_loadu_ps(d), a));
    _mm256_storeu_ps(d + 8, nan_ordered_add(_mm256_loadu_ps(d + 8), b));
  }
};

inline __m256 decode8(__m128i bytes, __m256 s) {  // the low 8 bytes, as signed codes
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)), s);
}

// 16 bytes of nibbles to the signed codes of elements 0-15 (lo) and 16-31 (hi), one per byte.
inline void unpack_nibbles(__m128i v, __m128i& lo, __m128i& hi) {
  const __m128i mask = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  const __m128i even = _mm_and_si128(v, mask), odd = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
  // (n ^ 8) - 8 sign-extends a 4-bit two's complement value.
  lo = _mm_sub_epi8(_mm_xor_si128(_mm_unpacklo_epi8(even, odd), eight), eight);
  hi = _mm_sub_epi8(_mm_xor_si128(_mm_unpackhi_epi8(even, odd), eight), eight);
}

// One step of 32 elements from 32 bytes of int8 codes or 16 of int4.
template <class Sink>
inline void decode_step(int q, const unsigned char* c, __m256 s, typename Sink::T* out) {
  __m128i lo, hi;
  if (q == 127) {
    lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c));
    hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 16));
  } else {
    unpack_nibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c)), lo, hi);
  }
  Sink::put(out, decode8(lo, s), decode8(_mm_srli_si128(lo, 8), s));
  Sink::put(out + 16, decode8(hi, s), decode8(_mm_srli_si128(hi, 8), s));
}

template <class Sink>
void dequantize_block(int q, const unsigned char* c, __m256 s, std::size_t len, typename Sink::T* o) {
  using T = typename Sink::T;
  const std::size_t shift = q == 127 ? 0 : 1;
  std::size_t i = 0;
  for (; i + kStep <= len; i += kStep) decode_step<Sink>(q, c + (i >> shift), s, o + i);
  if (i < len) {
    // The tail runs on copies (the accumulator's too, for the add), then only r values go back.
    const std::size_t r = len - i;
    unsigned char pad[kStep] = {};
    T tmp[kStep] = {};
    std::memcpy(pad, c + (i >> shift), (r + shift) >> shift);
    std::memcpy(tmp, o + i, r * sizeof(T));
    decode_step<Sink>(q, pad, s, tmp);
    std::memcpy(o + i, tmp, r * sizeof(T));
  }
}

// A finite scale times a code is never NaN, so only blocks with a non-finite scale go to
// NanSink (the bf16 store that tests for NaN; the same sink for the others).
template <class Sink, class NanSink = Sink>
void dequantize(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes, std::size_t n,
                typename Sink::T* out) {
  const std::size_t shift = q == 127 ? 0 : 1;
  for (std::size_t b = 0, start = 0; start < n; ++b, start += block) {
    const std::size_t len = n - start < block ? n - start : block;
    std::uint32_t sbits;
    std::memcpy(&sbits, scales + b * sizeof(float), sizeof sbits);
    const __m256 s = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(sbits)));
    const unsigned char* c = codes + (start >> shift);
    if ((sbits & 0x7F800000u) != 0x7F800000u) {
      dequantize_block<Sink>(q, c, s, len, out + start);
    } else {
      dequantize_block<NanSink>(q, c, s, len, out + start);
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
  dequantize<StoreF32>(q, block, scales, codes, n, out);
}
void dequantize_bf16(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                     std::size_t n, std::uint16_t* out) {
  dequantize<StoreBf16<false>, StoreBf16<true>>(q, block, scales, codes, n, out);
}
void dequantize_add(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                    std::size_t n, float* accum) {
  dequantize<AddF32>(q, block, scales, codes, n, accum);
}

}  // namespace

const Kernels kAvx2Kernels = {quantize_f32, quantize_bf16, dequantize_f32, dequantize_bf16, dequantize_add};

}  // namespace strata::quant_detail

#pragma GCC pop_options

#endif  // __x86_64__
