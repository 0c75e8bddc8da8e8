// The block quantization kernels: the wire layout by hand, the scalar reference against an
// independent reading of the format, every vector path against the scalar one bit for bit, the
// error bound, and the special blocks (zeros, huge values, denormals, underflow, NaN and inf).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/threads.hpp"
#include "quant/block_quant.hpp"

namespace strata {
namespace {

using Bytes = std::vector<unsigned char>;

constexpr QuantIsa kAllIsas[] = {QuantIsa::kScalar, QuantIsa::kAvx2, QuantIsa::kAvx512};
constexpr QuantBits kBoth[] = {QuantBits::kInt8, QuantBits::kInt4};
constexpr double kTiny = 0x1p-149;  // the smallest denormal
constexpr double kU = 0x1p-24;      // the unit roundoff of fp32

std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

// The format read straight from quant_format.hpp's layout description, sharing nothing with the
// kernels: scale b is fp32 b of the blob, then the code area.
float scale_at(const Bytes& blob, std::size_t b) {
  float s;
  std::memcpy(&s, blob.data() + 4 * b, 4);
  return s;
}

int code_at(QuantFormat f, const Bytes& blob, std::size_t n, std::size_t i) {
  const unsigned char* codes = blob.data() + 4 * quant_block_count(f, n);
  if (f.bits == QuantBits::kInt8) return static_cast<signed char>(codes[i]);
  const int nibble = i % 2 == 0 ? codes[i / 2] & 0xF : codes[i / 2] >> 4;
  return nibble >= 8 ? nibble - 16 : nibble;
}

// The format's quantization, written out element by element from the header's rules.
Bytes expected_blob(QuantFormat f, const std::vector<float>& x) {
  const std::size_t n = x.size();
  const int q = quant_max_code(f.bits);
  Bytes blob(quantized_bytes(f, n), 0);
  unsigned char* codes = blob.data() + 4 * quant_block_count(f, n);
  for (std::size_t b = 0; b * f.block < n; ++b) {
    const std::size_t begin = b * f.block, end = std::min<std::size_t>(n, begin + f.block);
    std::uint32_t amax_bits = 0;
    for (std::size_t i = begin; i < end; ++i) amax_bits = std::max(amax_bits, bits_of(x[i]) & 0x7FFFFFFFu);
    const float scale = from_bits(amax_bits) / static_cast<float>(q);
    std::memcpy(blob.data() + 4 * b, &scale, 4);
    if (scale == 0.0f || !std::isfinite(scale)) continue;  // codes stay 0
    for (std::size_t i = begin; i < end; ++i) {
      int c = static_cast<int>(std::nearbyint(x[i] / scale));
      c = std::max(-q, std::min(q, c));
      if (f.bits == QuantBits::kInt8) {
        codes[i] = static_cast<unsigned char>(c);
      } else {
        codes[i / 2] |= static_cast<unsigned char>((c & 0xF) << (i % 2 ? 4 : 0));
      }
    }
  }
  return blob;
}

std::vector<float> widened(const std::vector<bf16>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = from_bf16(x[i]);
  return out;
}

Bytes quantize(QuantFormat f, const std::vector<float>& x, QuantIsa isa = quant_isa_best()) {
  Bytes blob(quantized_bytes(f, x.size()), 0xAB);
  quantize_blocks(f, x.data(), x.size(), blob.data(), isa);
  return blob;
}

std::vector<float> decode(QuantFormat f, const Bytes& blob, std::size_t n, QuantIsa isa = quant_isa_best()) {
  std::vector<float> out(n, -1.0f);
  dequantize_blocks(f, blob.data(), n, out.data(), isa);
  return out;
}

bool same_bits(const void* a, const void* b, std::size_t bytes) { return bytes == 0 || std::memcmp(a, b, bytes) == 0; }

enum class Data { kGaussian, kWideExponents, kRandomBits, kTies, kDenormal };
constexpr Data kAllData[] = {Data::kGaussian, Data::kWideExponents, Data::kRandomBits, Data::kTies, Data::kDenormal};

std::string data_name(Data d) {
  switch (d) {
    case Data::kGaussian: return "gaussian";
    case Data::kWideExponents: return "wide exponents";
    case Data::kRandomBits: return "random bits";
    case Data::kTies: return "halfway ties";
    case Data::kDenormal: return "denormals";
  }
  return "?";
}

// Random inputs: Gaussians of one magnitude, magnitudes spread over the whole fp32 range, any bit
// pattern at all (NaN, inf and denormals included), values that fall exactly halfway between two
// codes, and denormals only.
std::vector<float> make_data(Data kind, std::size_t n, std::uint64_t seed, double magnitude = 1.0) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (kind) {
      case Data::kGaussian: x[i] = static_cast<float>(rng.normal() * magnitude); break;
      case Data::kWideExponents:
        x[i] = static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>(rng.below(260)) - 140));
        break;
      case Data::kRandomBits: x[i] = from_bits(static_cast<std::uint32_t>(rng.next_u64())); break;
      case Data::kTies:
        // Multiples of 1/2 up to 7: with int4 every block holding a 7 has scale exactly 1.
        x[i] = i % 16 == 0 ? 7.0f : static_cast<float>(static_cast<int>(rng.below(29)) - 14) * 0.5f;
        break;
      case Data::kDenormal:
        x[i] = static_cast<float>((static_cast<double>(rng.below(1u << 23)) - (1u << 22)) * kTiny);
        break;
    }
  }
  return x;
}

bool supported_or_skip_message(QuantIsa isa, std::string& message) {
  if (quant_isa_supported(isa)) return true;
  message = isa == QuantIsa::kAvx512 ? "this CPU lacks AVX-512 (F, BW and VL): the AVX-512 path is not tested"
                                     : "this CPU lacks AVX2: the AVX2 path is not tested";
  return false;
}

// --- sizes and parsing ---------------------------------------------------------------------------

TEST(QuantFormatSizes, ClosedForms) {
  const QuantFormat i8{QuantBits::kInt8, 16}, i4{QuantBits::kInt4, 16};
  EXPECT_EQ(quant_block_count(i8, 0), 0u);
  EXPECT_EQ(quant_block_count(i8, 1), 1u);
  EXPECT_EQ(quant_block_count(i8, 16), 1u);
  EXPECT_EQ(quant_block_count(i8, 17), 2u);
  EXPECT_EQ(quant_block_count(QuantFormat{QuantBits::kInt4, 2048}, 1u << 20), 512u);
  EXPECT_EQ(quant_code_bytes(i8, 17), 17u);
  EXPECT_EQ(quant_code_bytes(i4, 17), 9u);
  EXPECT_EQ(quant_code_bytes(i4, 16), 8u);
  EXPECT_EQ(quantized_bytes(i8, 0), 0u);
  EXPECT_EQ(quantized_bytes(i8, 33), 3u * 4 + 33);
  EXPECT_EQ(quantized_bytes(i4, 33), 3u * 4 + 17);
  EXPECT_EQ(quantized_bytes(QuantFormat{QuantBits::kInt8, 2048}, 4096), 2u * 4 + 4096);
  EXPECT_EQ(quant_max_code(QuantBits::kInt8), 127);
  EXPECT_EQ(quant_max_code(QuantBits::kInt4), 7);
  EXPECT_EQ(describe_quant(QuantFormat{QuantBits::kInt4, 512}), "int4/512");
  EXPECT_EQ(describe_quant(QuantFormat{}), "none");
}

TEST(QuantFormatSizes, ParseAndValidateRefuseBadInput) {
  EXPECT_EQ(parse_quant_bits("int8", "--x"), QuantBits::kInt8);
  EXPECT_EQ(parse_quant_bits("int4", "--x"), QuantBits::kInt4);
  EXPECT_EQ(parse_quant_bits("none", "--x"), QuantBits::kNone);
  for (const char* bad : {"", "INT8", "int16", "int8 ", "fp8"}) {
    EXPECT_THROW(parse_quant_bits(bad, "--x"), Error) << bad;
  }
  try {
    parse_quant_bits("int2", "--grad-quant");
    FAIL() << "int2 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--grad-quant"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(validate_quant_block(16, "b"));
  EXPECT_NO_THROW(validate_quant_block(1000, "b"));
  EXPECT_NO_THROW(validate_quant_block(kMaxQuantBlock, "b"));
  for (std::uint64_t bad : {0ull, 2ull, 14ull, 17ull, 1001ull, kMaxQuantBlock + 2ull, 1ull << 40})
    EXPECT_THROW(validate_quant_block(bad, "b"), Error) << bad;
}

// --- the wire layout, by hand ----------------------------------------------------------------------

TEST(BlockQuantLayout, Int4TinyExampleByteForByte) {
  // Block 0 has amax 7, so scale 1 and every code is x rounded half to even; block 1 (3
  // elements, an odd run) has amax 14, so scale 2.
  const std::vector<float> x = {1, -1, 2, -2, 3, -3, 7, -7, 0, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 6.4f, -6.6f,
                                14, -3.5f, 1.75f};
  // codes:  1 -1  2 -2  3 -3  7 -7  0  0  2  2  0 -2  6 -7 | 7 -2  1 (0)
  const Bytes expected = {0x00, 0x00, 0x80, 0x3F,  // 1.0f
                          0x00, 0x00, 0x00, 0x40,  // 2.0f
                          0xF1, 0xE2, 0xD3, 0x97, 0x00, 0x22, 0xE0, 0x96,  // low nibble = even element
                          0xE7, 0x01};             // the odd run's last high nibble is 0
  const QuantFormat f{QuantBits::kInt4, 16};
  ASSERT_EQ(quantized_bytes(f, x.size()), expected.size());
  for (QuantIsa isa : kAllIsas) {
    if (!quant_isa_supported(isa)) continue;
    SCOPED_TRACE(std::string(quant_isa_name(isa)));
    EXPECT_EQ(quantize(f, x, isa), expected);
    const std::vector<float> d = decode(f, expected, x.size(), isa);
    const std::vector<float> want = {1, -1, 2, -2, 3, -3, 7, -7, 0, 0, 2, 2, 0, -2, 6, -7, 14, -4, 2};
    EXPECT_EQ(d, want);
  }
}

TEST(BlockQuantLayout, Int8TinyExampleByteForByte) {
  // amax 127 gives scale 1; block 1 holds two elements with amax 254, scale 2.
  std::vector<float> x(18);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i * 8 - 64);  // -64 ... 56
  x[3] = 127;
  x[4] = -126.5f;  // a tie: rounds to the even -126
  x[16] = -254;
  x[17] = 3;  // 1.5: rounds to 2
  Bytes expected = {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40};
  for (int i = 0; i < 16; ++i) expected.push_back(static_cast<unsigned char>(i * 8 - 64));
  expected[8 + 3] = 0x7F;
  expected[8 + 4] = 0x82;  // -126
  expected.push_back(0x81);  // -127
  expected.push_back(0x02);
  const QuantFormat f{QuantBits::kInt8, 16};
  for (QuantIsa isa : kAllIsas) {
    if (!quant_isa_supported(isa)) continue;
    SCOPED_TRACE(std::string(quant_isa_name(isa)));
    EXPECT_EQ(quantize(f, x, isa), expected);
  }
}

// --- the scalar reference against the format, and every vector path against the scalar one -----

const std::size_t kLengths[] = {0,   1,    2,    3,    15,   16,   17,   31,   32,   33,  47,
                                63,  64,   65,   999,  1000, 1001, 2047, 2048, 2049, 4099};
const std::uint32_t kBlocks[] = {16, 34, 1000, 2048};

TEST(BlockQuantReference, ScalarFollowsTheFormat) {
  for (std::uint32_t block : kBlocks)
    for (QuantBits bits : kBoth)
      for (Data data : kAllData)
        for (std::size_t n : {std::size_t{17}, std::size_t{1001}, std::size_t{4099}}) {
          const QuantFormat f{bits, block};
          SCOPED_TRACE(describe_quant(f) + " n=" + std::to_string(n) + " " + data_name(data));
          const std::vector<float> x = make_data(data, n, n * 7 + block);
          const Bytes blob = quantize(f, x, QuantIsa::kScalar);
          ASSERT_EQ(blob, expected_blob(f, x));
          const std::vector<float> d = decode(f, blob, n, QuantIsa::kScalar);
          for (std::size_t i = 0; i < n; ++i) {
            const float want = static_cast<float>(code_at(f, blob, n, i)) * scale_at(blob, i / block);
            ASSERT_EQ(bits_of(d[i]), bits_of(want)) << i;
          }
        }
}

// Quantizes, decodes to fp32 and bf16 and decode-adds with `isa` and with the scalar reference,
// from unaligned buffers, and requires the same bytes everywhere.
template <class In>
void expect_same_as_scalar(QuantIsa isa, QuantFormat f, const std::vector<In>& x, const std::string& what) {
  SCOPED_TRACE(what);
  const std::size_t n = x.size();
  const std::size_t bytes = quantized_bytes(f, n);
  // One element and one byte off alignment: scales sit at any address in a real blob.
  std::vector<In> in(n + 1);
  std::copy(x.begin(), x.end(), in.begin() + 1);
  Bytes fast(bytes + 1, 0x55), ref(bytes + 1, 0xAA);
  quantize_blocks(f, in.data() + 1, n, fast.data() + 1, isa);
  quantize_blocks(f, in.data() + 1, n, ref.data() + 1, QuantIsa::kScalar);
  ASSERT_TRUE(same_bits(fast.data() + 1, ref.data() + 1, bytes)) << "blobs differ";

  std::vector<float> out_fast(n + 1, 1.0f), out_ref(n + 1, 2.0f);
  dequantize_blocks(f, ref.data() + 1, n, out_fast.data() + 1, isa);
  dequantize_blocks(f, ref.data() + 1, n, out_ref.data() + 1, QuantIsa::kScalar);
  ASSERT_TRUE(same_bits(out_fast.data() + 1, out_ref.data() + 1, n * 4)) << "fp32 decodes differ";

  std::vector<bf16> h_fast(n + 1, 1), h_ref(n + 1, 2);
  dequantize_blocks(f, ref.data() + 1, n, h_fast.data() + 1, isa);
  dequantize_blocks(f, ref.data() + 1, n, h_ref.data() + 1, QuantIsa::kScalar);
  ASSERT_TRUE(same_bits(h_fast.data() + 1, h_ref.data() + 1, n * 2)) << "bf16 decodes differ";

  // Accumulators with some NaNs of their own: a NaN sum must carry the same payload on each path.
  std::vector<float> acc_fast = make_data(Data::kGaussian, n + 1, n + 3);
  const std::vector<float> noise = make_data(Data::kRandomBits, n + 1, n + 4);
  for (std::size_t i = 0; i < n + 1; i += 5) acc_fast[i] = noise[i];
  std::vector<float> acc_ref = acc_fast;
  dequantize_add_blocks(f, ref.data() + 1, n, acc_fast.data() + 1, isa);
  dequantize_add_blocks(f, ref.data() + 1, n, acc_ref.data() + 1, QuantIsa::kScalar);
  ASSERT_TRUE(same_bits(acc_fast.data(), acc_ref.data(), (n + 1) * 4)) << "decode-adds differ";
}

void expect_path_matches_scalar(QuantIsa isa) {
  for (std::uint32_t block : kBlocks)
    for (QuantBits bits : kBoth) {
      const QuantFormat f{bits, block};
      for (Data data : kAllData)
        for (std::size_t n : kLengths) {
          const std::string what = describe_quant(f) + " n=" + std::to_string(n) + " " + data_name(data);
          const std::vector<float> x = make_data(data, n, 1000 * n + block + static_cast<int>(data));
          expect_same_as_scalar(isa, f, x, what + " fp32");
          std::vector<bf16> h(n);
          // bf16 from the same data, and (for random bits) raw 16-bit patterns, NaNs included.
          for (std::size_t i = 0; i < n; ++i)
            h[i] = data == Data::kRandomBits ? static_cast<bf16>(bits_of(x[i])) : to_bf16(x[i]);
          expect_same_as_scalar(isa, f, h, what + " bf16");
          if (::testing::Test::HasFatalFailure()) return;
        }
      // Magnitudes from denormal to near overflow, in runs long enough for the OpenMP split.
      for (double magnitude : {1e-41, 1e-30, 1e-3, 1.0, 1e4, 1e30})
        for (std::size_t n : {std::size_t{65537}, std::size_t{200003}}) {
          const std::vector<float> x = make_data(Data::kGaussian, n, n + block, magnitude);
          expect_same_as_scalar(isa, f, x, describe_quant(f) + " n=" + std::to_string(n) + " gaussian*" +
                                               std::to_string(magnitude));
          if (::testing::Test::HasFatalFailure()) return;
        }
      const std::vector<float> x = make_data(Data::kRandomBits, 131073, block);
      expect_same_as_scalar(isa, f, x, describe_quant(f) + " n=131073 random bits");
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(BlockQuantPaths, Avx2EqualsScalarBitForBit) {
  std::string why;
  if (!supported_or_skip_message(QuantIsa::kAvx2, why)) GTEST_SKIP() << why;
  expect_path_matches_scalar(QuantIsa::kAvx2);
}

TEST(BlockQuantPaths, Avx512EqualsScalarBitForBit) {
  std::string why;
  if (!supported_or_skip_message(QuantIsa::kAvx512, why)) GTEST_SKIP() << why;
  expect_path_matches_scalar(QuantIsa::kAvx512);
}

TEST(BlockQuantPaths, BitsDoNotDependOnTheThreadCount) {
  const int saved = thread_count();
  const QuantFormat f{QuantBits::kInt4, 1000};
  const std::vector<float> x = make_data(Data::kWideExponents, 300001, 9);
  for (QuantIsa isa : kAllIsas) {
    if (!quant_isa_supported(isa)) continue;
    SCOPED_TRACE(std::string(quant_isa_name(isa)));
    set_thread_count(1);
    const Bytes one = quantize(f, x, isa);
    const std::vector<float> d1 = decode(f, one, x.size(), isa);
    for (int threads : {2, 3, 7}) {
      set_thread_count(threads);
      EXPECT_EQ(quantize(f, x, isa), one) << threads << " threads";
      const std::vector<float> d = decode(f, one, x.size(), isa);
      EXPECT_TRUE(same_bits(d.data(), d1.data(), 4 * d.size())) << threads << " threads";
    }
  }
  set_thread_count(saved);
}

// --- the error bound ------------------------------------------------------------------------------

// With s the stored scale (s > 0, finite) and c the code: the format gives |x - c s| <= s/2 when
// x/s and c*s are exact. Each of them is one rounded fp32 operation:
//   fl(x/s) = x/s (1 + d1) with |d1| <= u = 2^-24, or off by at most 2^-150 when the quotient is
//   subnormal: in x's units, u|x| + 2^-150 s;
//   fl(c s) = c s (1 + d2), or off by at most 2^-150 when the product is subnormal: u|c|s + 2^-150.
// The code never needs clamping when s is normal (x/s <= Q(1 + 2u) rounds to at most Q). When s is
// subnormal, s = amax/Q + e with |e| <= 2^-150, and a clamped element (x/s > Q + 1/2) is off by up
// to amax - Q s <= Q 2^-150. So
//   |x - decoded| <= s/2 + u(|x| + |c| s) + 2^-150 (1 + s) + [s subnormal] Q 2^-150.
double error_bound(double x, double s, int c, int q) {
  const double underflow = s < FLT_MIN ? q * 0x1p-150 : 0.0;
  return s / 2 + kU * (std::abs(x) + std::abs(c) * s) + 0x1p-150 * (1 + s) + underflow;
}

// Checks the bound and that no decoded value exceeds its block's amax by more than the rounding of
// s and of c*s (plus the subnormal scale's excess, up to Q 2^-150).
void expect_within_bound(QuantFormat f, const std::vector<float>& x, const Bytes& blob,
                         const std::vector<float>& decoded) {
  const int q = quant_max_code(f.bits);
  const std::size_t n = x.size();
  for (std::size_t b = 0; b * f.block < n; ++b) {
    const std::size_t begin = b * f.block, end = std::min<std::size_t>(n, begin + f.block);
    double amax = 0;
    for (std::size_t i = begin; i < end; ++i) amax = std::max(amax, std::abs(static_cast<double>(x[i])));
    const double s = scale_at(blob, b);
    ASSERT_TRUE(std::isfinite(s));
    for (std::size_t i = begin; i < end; ++i) {
      const double err = std::abs(static_cast<double>(x[i]) - decoded[i]);
      ASSERT_LE(err, error_bound(x[i], s, code_at(f, blob, n, i), q))
          << "element " << i << " x=" << x[i] << " decoded=" << decoded[i] << " scale=" << s;
      const double excess = s < FLT_MIN ? q * 0x1p-150 : 0.0;
      ASSERT_LE(std::abs(static_cast<double>(decoded[i])), amax * (1 + 2.0001 * kU) + excess) << "element " << i;
    }
  }
}

TEST(BlockQuantError, WithinHalfAScalePlusRounding) {
  for (QuantBits bits : kBoth)
    for (std::uint32_t block : {16u, 1000u, 2048u}) {
      const QuantFormat f{bits, block};
      struct Case {
        Data data;
        double magnitude;  // of the Gaussians only
      };
      for (Case c : {Case{Data::kGaussian, 1e-30}, Case{Data::kGaussian, 1e-3}, Case{Data::kGaussian, 1.0},
                     Case{Data::kGaussian, 1e30}, Case{Data::kWideExponents, 1}, Case{Data::kTies, 1},
                     Case{Data::kDenormal, 1}}) {
        SCOPED_TRACE(describe_quant(f) + " " + data_name(c.data) + " *" + std::to_string(c.magnitude));
        const std::vector<float> x = make_data(c.data, 20011, block + static_cast<int>(c.data), c.magnitude);
        const Bytes blob = quantize(f, x);
        expect_within_bound(f, x, blob, decode(f, blob, x.size()));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
}

TEST(BlockQuantError, Int8IsAboutEighteenTimesFinerThanInt4) {
  // Not a bound: a sanity check of the code widths. On Gaussian data the rms error relative to
  // the rms value is around amax/(Q sqrt(12)); with the same blocks int4/int8 ~ 127/7.
  const std::vector<float> x = make_data(Data::kGaussian, 1 << 16, 3);
  double err[2] = {0, 0}, norm = 0;
  for (int k = 0; k < 2; ++k) {
    const QuantFormat f{kBoth[k], 256};
    const std::vector<float> d = decode(f, quantize(f, x), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) err[k] += (x[i] - static_cast<double>(d[i])) * (x[i] - d[i]);
  }
  for (float v : x) norm += static_cast<double>(v) * v;
  EXPECT_LT(std::sqrt(err[0] / norm), 0.015);
  EXPECT_NEAR(std::sqrt(err[1] / err[0]), 127.0 / 7.0, 3.0);
}

// --- special blocks --------------------------------------------------------------------------------

TEST(BlockQuantSpecial, ZeroBlocksHaveScaleZeroAndDecodeToZeros) {
  for (QuantBits bits : kBoth)
    for (QuantIsa isa : kAllIsas) {
      if (!quant_isa_supported(isa)) continue;
      const QuantFormat f{bits, 16};
      std::vector<float> x(41, 0.0f);
      for (std::size_t i = 0; i < x.size(); i += 3) x[i] = -0.0f;
      const Bytes blob = quantize(f, x, isa);
      EXPECT_TRUE(std::all_of(blob.begin(), blob.end(), [](unsigned char c) { return c == 0; }));
      for (float v : decode(f, blob, x.size(), isa)) EXPECT_EQ(bits_of(v), 0u);  // +0, never NaN
      std::vector<bf16> h(x.size(), 7);
      dequantize_blocks(f, blob.data(), x.size(), h.data(), isa);
      for (bf16 v : h) EXPECT_EQ(v, 0);
    }
}

TEST(BlockQuantSpecial, OneHugeValueLeavesEverythingFinite) {
  for (QuantBits bits : kBoth)
    for (QuantIsa isa : kAllIsas) {
      if (!quant_isa_supported(isa)) continue;
      SCOPED_TRACE(std::string(quant_bits_name(bits)) + " " + std::string(quant_isa_name(isa)));
      const QuantFormat f{bits, 16};
      std::vector<float> x = make_data(Data::kGaussian, 32, 4);
      x[5] = 3e38f;
      x[20] = -3e38f;
      const Bytes blob = quantize(f, x, isa);
      const std::vector<float> d = decode(f, blob, x.size(), isa);
      for (std::size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(std::isfinite(d[i])) << i;
        if (i != 5 && i != 20) {
          EXPECT_EQ(d[i], 0.0f) << i;  // far below half a scale
        }
      }
      EXPECT_GT(d[5], 2.9e38f);
      EXPECT_LT(d[20], -2.9e38f);
      expect_within_bound(f, x, blob, d);
      // (At amax = FLT_MAX exactly, int8's 127 * fl(FLT_MAX / 127) rounds up to inf: the format
      // keeps the product c * s, so that one value is not representable. 3e38 is far from it.)
    }
}

TEST(BlockQuantSpecial, DenormalBlocksStayWithinTheSubnormalBound) {
  for (QuantBits bits : kBoth) {
    const QuantFormat f{bits, 1000};
    const std::vector<float> x = make_data(Data::kDenormal, 5000, 11);
    for (float v : x) ASSERT_LT(std::abs(v), FLT_MIN);
    const Bytes blob = quantize(f, x);
    expect_within_bound(f, x, blob, decode(f, blob, x.size()));
    // With amax = 2^22 tiny units the scale (~ 2^22/Q tiny) is itself subnormal yet coarse
    // enough that the rounding of s costs little: within s/2 + one tiny unit.
    const std::vector<float> d = decode(f, blob, x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_LE(std::abs(static_cast<double>(x[i]) - d[i]), scale_at(blob, i / 1000) / 2 + kTiny) << i;
  }
  // A subnormal scale can be far off amax/Q: amax = 189 tiny units gives 189/127 = 1.49 units,
  // which rounds to 1, so amax / scale = 189 and the largest element clamps to 127 units (off by
  // 62 units, not half a scale). The bound above covers this with its Q 2^-150 term.
  std::vector<float> x(16, 0.0f);
  x[0] = static_cast<float>(189 * kTiny);
  x[1] = static_cast<float>(-50 * kTiny);
  const QuantFormat f{QuantBits::kInt8, 16};
  const Bytes blob = quantize(f, x);
  EXPECT_EQ(scale_at(blob, 0), static_cast<float>(kTiny));
  const std::vector<float> d = decode(f, blob, x.size());
  EXPECT_EQ(d[0], static_cast<float>(127 * kTiny));
  EXPECT_EQ(d[1], static_cast<float>(-50 * kTiny));
  expect_within_bound(f, x, blob, d);
}

TEST(BlockQuantSpecial, ScaleUnderflowingToZeroDecodesToZeros) {
  // amax/Q below half the smallest denormal rounds to a zero scale: int8 at amax = 63 units
  // (63/127 < 1/2), int4 at 3 units (3/7); one unit more gives scale = one unit.
  for (QuantBits bits : kBoth) {
    const int q = quant_max_code(bits);
    const double units = bits == QuantBits::kInt8 ? 63 : 3;
    const QuantFormat f{bits, 16};
    for (QuantIsa isa : kAllIsas) {
      if (!quant_isa_supported(isa)) continue;
      std::vector<float> x(16);
      for (int i = 0; i < 16; ++i) x[i] = static_cast<float>((i % 2 ? -1 : 1) * std::min<double>(i, units) * kTiny);
      Bytes blob = quantize(f, x, isa);
      EXPECT_EQ(bits_of(scale_at(blob, 0)), 0u) << q;
      for (float v : decode(f, blob, 16, isa)) EXPECT_EQ(bits_of(v), 0u);
      x[15] = static_cast<float>((units + 1) * kTiny);
      blob = quantize(f, x, isa);
      EXPECT_EQ(scale_at(blob, 0), static_cast<float>(kTiny)) << q;
    }
  }
}

TEST(BlockQuantSpecial, NanOrInfPoisonsExactlyItsBlock) {
  for (QuantBits bits : kBoth)
    for (QuantIsa isa : kAllIsas) {
      if (!quant_isa_supported(isa)) continue;
      SCOPED_TRACE(std::string(quant_bits_name(bits)) + " " + std::string(quant_isa_name(isa)));
      const QuantFormat f{bits, 16};
      const std::size_t n = 5 * 16 - 3;  // the last block partial and odd
      std::vector<float> x = make_data(Data::kGaussian, n, 8);
      const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
      x[16 + 9] = nan;
      x[48 + 2] = inf;
      x[64 + 12] = -inf;
      const std::vector<bool> poisoned = {false, true, false, true, true};
      const Bytes blob = quantize(f, x, isa);
      EXPECT_TRUE(std::isnan(scale_at(blob, 1)));
      EXPECT_EQ(scale_at(blob, 3), inf);
      EXPECT_EQ(scale_at(blob, 4), inf);
      const std::vector<float> d = decode(f, blob, n, isa);
      std::vector<bf16> h(n);
      dequantize_blocks(f, blob.data(), n, h.data(), isa);
      std::vector<float> acc(n, 1.0f);
      dequantize_add_blocks(f, blob.data(), n, acc.data(), isa);
      for (std::size_t i = 0; i < n; ++i) {
        const bool bad = poisoned[i / 16];
        if (bad) {
          EXPECT_EQ(code_at(f, blob, n, i), 0) << i;
        }
        EXPECT_EQ(std::isnan(d[i]), bad) << i;
        EXPECT_EQ(std::isnan(from_bf16(h[i])), bad) << i;
        EXPECT_EQ(std::isnan(acc[i]), bad) << i;
      }
      // The clean blocks come out as if quantized on their own.
      for (std::size_t b : {0u, 2u}) {
        const std::vector<float> part(x.begin() + 16 * b, x.begin() + 16 * (b + 1));
        const std::vector<float> alone = decode(f, quantize(f, part, isa), 16, isa);
        EXPECT_TRUE(same_bits(alone.data(), d.data() + 16 * b, 64)) << "block " << b;
      }
    }
}

TEST(BlockQuantSpecial, Bf16InputAndOutput) {
  for (QuantBits bits : kBoth)
    for (QuantIsa isa : kAllIsas) {
      if (!quant_isa_supported(isa)) continue;
      SCOPED_TRACE(std::string(quant_bits_name(bits)) + " " + std::string(quant_isa_name(isa)));
      const QuantFormat f{bits, 1000};
      std::vector<bf16> h(4321);
      const std::vector<float> g = make_data(Data::kWideExponents, h.size(), 6);
      for (std::size_t i = 0; i < h.size(); ++i) h[i] = to_bf16(g[i]);
      const std::vector<float> x = widened(h);
      Bytes blob(quantized_bytes(f, h.size()));
      quantize_blocks(f, h.data(), h.size(), blob.data(), isa);
      // bf16 in is exactly its widened fp32 in.
      EXPECT_EQ(blob, quantize(f, x, isa));
      const std::vector<float> d = decode(f, blob, h.size(), isa);
      expect_within_bound(f, x, blob, d);
      std::vector<bf16> out(h.size());
      dequantize_blocks(f, blob.data(), h.size(), out.data(), isa);
      for (std::size_t i = 0; i < h.size(); ++i) ASSERT_EQ(out[i], to_bf16(d[i])) << i;
    }
}

TEST(BlockQuantSpecial, DequantizeAddIsAProductThenASum) {
  const QuantFormat f{QuantBits::kInt8, 16};
  const std::vector<float> x = make_data(Data::kGaussian, 100, 12);
  for (QuantIsa isa : kAllIsas) {
    if (!quant_isa_supported(isa)) continue;
    const Bytes blob = quantize(f, x, isa);
    std::vector<float> acc = make_data(Data::kGaussian, 100, 13, 1e3);
    const std::vector<float> before = acc;
    dequantize_add_blocks(f, blob.data(), x.size(), acc.data(), isa);
    for (std::size_t i = 0; i < x.size(); ++i) {
      volatile float product = static_cast<float>(code_at(f, blob, x.size(), i)) * scale_at(blob, i / 16);
      volatile float sum = before[i] + product;
      ASSERT_EQ(bits_of(acc[i]), bits_of(sum)) << i;
    }
  }
}

}  // namespace
}  // namespace strata
