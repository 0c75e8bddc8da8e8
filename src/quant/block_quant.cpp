// The scalar reference of the block quantization kernels (the definition every vector path must
// match bit for bit), the run-time choice of path, and the split of long runs over OpenMP threads.
#include "quant/block_quant.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "quant/block_quant_kernels.hpp"

#if defined(__x86_64__)
#define STRATA_QUANT_X86 1
#else
#define STRATA_QUANT_X86 0
#endif

namespace strata {
namespace quant_detail {
namespace {

float load_scale(const unsigned char* scales, std::size_t b) {
  float s;
  std::memcpy(&s, scales + b * sizeof(float), sizeof s);
  return s;
}

float widen(float x) { return x; }
float widen(std::uint16_t x) { return from_bf16(x); }

// amax is taken on the bit patterns with the sign cleared: as unsigned integers these order like
// the magnitudes, NaN above inf above every finite value, whatever order the block is read in.
template <class In>
float block_amax(const In* x, std::size_t len) {
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < len; ++i) m = std::max(m, std::bit_cast<std::uint32_t>(widen(x[i])) & 0x7FFFFFFFu);
  return std::bit_cast<float>(m);
}

// The code of one element; the caller has ruled out a zero or non-finite scale.
int encode(float x, float scale, int q) {
  const float r = std::nearbyint(x / scale);  // a true division: the error bound rests on it
  return static_cast<int>(std::fmin(std::fmax(r, static_cast<float>(-q)), static_cast<float>(q)));
}

template <class In>
void quantize_ref(int q, std::uint32_t block, const In* in, std::size_t n, unsigned char* scales,
                  unsigned char* codes) {
  for (std::size_t b = 0, start = 0; start < n; ++b, start += block) {
    const std::size_t len = std::min<std::size_t>(block, n - start);
    const float scale = block_amax(in + start, len) / static_cast<float>(q);
    std::memcpy(scales + b * sizeof(float), &scale, sizeof scale);
    // One decision per block: zero or non-finite scales leave all codes 0, so a zero block
    // decodes to zeros and an inf/NaN block to 0 * scale = NaN.
    const bool live = scale != 0.0f && std::isfinite(scale);
    const In* x = in + start;
    if (q == 127) {
      auto* c = reinterpret_cast<signed char*>(codes + start);
      for (std::size_t i = 0; i < len; ++i) c[i] = static_cast<signed char>(live ? encode(widen(x[i]), scale, q) : 0);
    } else {
      unsigned char* c = codes + start / 2;
      for (std::size_t i = 0; i < len; i += 2) {
        const int lo = live ? encode(widen(x[i]), scale, q) : 0;
        const int hi = live && i + 1 < len ? encode(widen(x[i + 1]), scale, q) : 0;
        c[i / 2] = static_cast<unsigned char>((lo & 0xF) | ((hi & 0xF) << 4));
      }
    }
  }
}

int code_at(int q, const unsigned char* codes, std::size_t i) {
  if (q == 127) return static_cast<signed char>(codes[i]);
  const unsigned nibble = (codes[i / 2] >> (i % 2 ? 4 : 0)) & 0xFu;
  return static_cast<int>(nibble ^ 8u) - 8;  // sign-extends the 4-bit two's complement
}

// Calls f(i, decoded) for each element; the decode is the one product the format defines.
template <class F>
void for_each_decoded(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                      std::size_t n, F&& f) {
  for (std::size_t b = 0, start = 0; start < n; ++b, start += block) {
    const float scale = load_scale(scales, b);
    const std::size_t end = std::min<std::size_t>(start + block, n);
    for (std::size_t i = start; i < end; ++i) f(i, static_cast<float>(code_at(q, codes, i)) * scale);
  }
}

void quantize_f32_ref(int q, std::uint32_t block, const float* in, std::size_t n, unsigned char* scales,
                      unsigned char* codes) {
  quantize_ref(q, block, in, n, scales, codes);
}
void quantize_bf16_ref(int q, std::uint32_t block, const std::uint16_t* in, std::size_t n, unsigned char* scales,
                       unsigned char* codes) {
  quantize_ref(q, block, in, n, scales, codes);
}
void dequantize_f32_ref(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                        std::size_t n, float* out) {
  for_each_decoded(q, block, scales, codes, n, [&](std::size_t i, float v) { out[i] = v; });
}
void dequantize_bf16_ref(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                         std::size_t n, std::uint16_t* out) {
  for_each_decoded(q, block, scales, codes, n, [&](std::size_t i, float v) { out[i] = to_bf16(v); });
}
// accum + v with the NaN that propagates made explicit: IEEE 754 leaves to the implementation which
// input's payload a NaN sum carries, and a compiler may swap the operands of a commutative add
// (the sanitizer build did), so the definition says: the accumulator's NaN, else the decoded one,
// quieted, as x86's add with the accumulator as first operand gives.
float nan_ordered_add(float accum, float v) {
  const auto quiet = [](float x) { return std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) | 0x00400000u); };
  if (std::isnan(accum)) return quiet(accum);
  if (std::isnan(v)) return quiet(v);
  return accum + v;
}

void dequantize_add_ref(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                        std::size_t n, float* accum) {
  for_each_decoded(q, block, scales, codes, n, [&](std::size_t i, float v) { accum[i] = nan_ordered_add(accum[i], v); });
}

}  // namespace

const Kernels kScalarKernels = {quantize_f32_ref, quantize_bf16_ref, dequantize_f32_ref, dequantize_bf16_ref,
                                dequantize_add_ref};

}  // namespace quant_detail

namespace {

using quant_detail::Kernels;

const Kernels& kernels_for(QuantIsa isa) {
  STRATA_CHECK(quant_isa_supported(isa), "the {} quantization kernels on a CPU without them", quant_isa_name(isa));
#if STRATA_QUANT_X86
  if (isa == QuantIsa::kAvx512) return quant_detail::kAvx512Kernels;
  if (isa == QuantIsa::kAvx2) return quant_detail::kAvx2Kernels;
#endif
  return quant_detail::kScalarKernels;
}

void check_format(QuantFormat f) {
  STRATA_CHECK(f.enabled(), "a quantization kernel called with the unquantized format");
  STRATA_CHECK(f.block >= kMinQuantBlock && f.block <= kMaxQuantBlock && f.block % 2 == 0,
               "a quantization block of {} elements reached the kernels", f.block);
}

// Below this a run is not worth waking threads for; above it each thread takes a contiguous run
// of chunks, and since every block is coded on its own the bits cannot depend on the split.
constexpr std::size_t kParallelMin = 65536;
constexpr std::size_t kChunkElements = 32768;

// Calls range(first_block, first_element, elements) over ranges of whole blocks covering [0, n).
template <class Range>
void split_blocks(QuantFormat f, std::size_t n, Range&& range) {
  const std::size_t blocks = quant_block_count(f, n);
  const std::size_t per_chunk = std::max<std::size_t>(1, kChunkElements / f.block);
  const std::size_t chunks = (blocks + per_chunk - 1) / per_chunk;
  const auto chunk_count = static_cast<std::ptrdiff_t>(chunks);
#pragma omp parallel for schedule(static) if (n >= kParallelMin && chunks > 1)
  for (std::ptrdiff_t c = 0; c < chunk_count; ++c) {
    const std::size_t first = static_cast<std::size_t>(c) * per_chunk;
    const std::size_t begin = first * f.block;
    const std::size_t end = std::min(n, (first + per_chunk) * f.block);
    range(first, begin, end - begin);
  }
}

struct BlobParts {
  std::size_t blocks;
  std::size_t code_offset;  // where the code area starts in the blob
};

BlobParts blob_parts(QuantFormat f, std::size_t n) {
  const std::size_t blocks = quant_block_count(f, n);
  return {blocks, blocks * sizeof(float)};
}

// Bytes of code before element `begin` (a block boundary, hence even).
std::size_t code_bytes_before(QuantFormat f, std::size_t begin) {
  return begin * static_cast<std::size_t>(f.bits) / 8;
}

template <class In, class Kernel>
void quantize_any(QuantFormat f, const In* in, std::size_t n, void* blob, Kernel kernel) {
  check_format(f);
  if (n == 0) return;
  auto* bytes = static_cast<unsigned char*>(blob);
  const BlobParts parts = blob_parts(f, n);
  const int q = quant_max_code(f.bits);
  split_blocks(f, n, [&](std::size_t first, std::size_t begin, std::size_t count) {
    kernel(q, f.block, in + begin, count, bytes + first * sizeof(float),
           bytes + parts.code_offset + code_bytes_before(f, begin));
  });
}

template <class Out, class Kernel>
void dequantize_any(QuantFormat f, const void* blob, std::size_t n, Out* out, Kernel kernel) {
  check_format(f);
  if (n == 0) return;
  const auto* bytes = static_cast<const unsigned char*>(blob);
  const BlobParts parts = blob_parts(f, n);
  const int q = quant_max_code(f.bits);
  split_blocks(f, n, [&](std::size_t first, std::size_t begin, std::size_t count) {
    kernel(q, f.block, bytes + first * sizeof(float), bytes + parts.code_offset + code_bytes_before(f, begin), count,
           out + begin);
  });
}

}  // namespace

bool quant_isa_supported(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::kScalar: return true;
#if STRATA_QUANT_X86
    // Idempotent; needed should this run before the CPU model is set up (a static initializer).
    case QuantIsa::kAvx2: __builtin_cpu_init(); return __builtin_cpu_supports("avx2");
    case QuantIsa::kAvx512:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
#else
    case QuantIsa::kAvx2:
    case QuantIsa::kAvx512: return false;
#endif
  }
  return false;
}

QuantIsa quant_isa_best() {
  static const QuantIsa best = quant_isa_supported(QuantIsa::kAvx512) ? QuantIsa::kAvx512
                               : quant_isa_supported(QuantIsa::kAvx2) ? QuantIsa::kAvx2
                                                                      : QuantIsa::kScalar;
  return best;
}

std::string_view quant_isa_name(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::kScalar: return "scalar";
    case QuantIsa::kAvx2: return "avx2";
    case QuantIsa::kAvx512: return "avx512";
  }
  return "?";
}

void quantize_blocks(QuantFormat f, const float* in, std::size_t n, void* blob, QuantIsa isa) {
  quantize_any(f, in, n, blob, kernels_for(isa).quantize_f32);
}

void quantize_blocks(QuantFormat f, const bf16* in, std::size_t n, void* blob, QuantIsa isa) {
  quantize_any(f, in, n, blob, kernels_for(isa).quantize_bf16);
}

void dequantize_blocks(QuantFormat f, const void* blob, std::size_t n, float* out, QuantIsa isa) {
  dequantize_any(f, blob, n, out, kernels_for(isa).dequantize_f32);
}

void dequantize_blocks(QuantFormat f, const void* blob, std::size_t n, bf16* out, QuantIsa isa) {
  dequantize_any(f, blob, n, out, kernels_for(isa).dequantize_bf16);
}

void dequantize_add_blocks(QuantFormat f, const void* blob, std::size_t n, float* accum, QuantIsa isa) {
  dequantize_any(f, blob, n, accum, kernels_for(isa).dequantize_add);
}

}  // namespace strata
