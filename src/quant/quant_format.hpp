// The block-quantization format of the quantized collectives (qwZ, qgZ): symmetric codes with
// one fp32 scale per block of B elements, int8 or int4, and the bytes a run of n elements takes on
// the wire. The layout below is the contract between the kernels, the collectives and the meter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

// Bits per code; kNone: the collective moves its plain dtype.
enum class QuantBits : std::uint8_t { kNone = 0, kInt4 = 4, kInt8 = 8 };

// The block sizes when none is given, the best measured trade-offs (docs/architecture.md): kernel
// speed is flat from 256 up, so the choice is accuracy against the scales' bytes. Weights (int8)
// are smooth: 256 costs 1.6% of their bytes. Gradients (int4) are heavy-tailed: on the tiny model
// after 300 steps int4 gradients cost about 5% of validation loss at 2048, 2% at 256 and under
// 1% at 64, where the scales cost 12.5% of int4 bytes.
inline constexpr std::uint32_t kDefaultWeightQuantBlock = 256;
inline constexpr std::uint32_t kDefaultGradQuantBlock = 64;
inline constexpr std::uint32_t kMinQuantBlock = 16;
inline constexpr std::uint32_t kMaxQuantBlock = 1u << 20;

// A run of n elements quantized as blocks of `block` elements, the last one partial when block
// does not divide n. Wire layout of one run ("blob"), little-endian:
//   [scale of block 0, ..., scale of block nb-1 : nb fp32] [codes]
// Codes of block b start at byte b * block * bits / 8 of the code area (block is even, so every
// block starts on a byte). int8: one two's-complement byte per element in [-127, 127].
// int4: two elements per byte, element 2k in the low nibble (bits 0-3) and element 2k+1 in the
// high nibble (bits 4-7), each a two's-complement nibble in [-7, 7]; an odd run leaves the last
// high nibble 0. Element i of block b decodes to code_i * scale_b, where scale_b = amax_b / Q
// (Q = 127 or 7, amax_b the largest |x| of the block), and code_i = round-to-nearest-even(x_i /
// scale_b) clamped to [-Q, Q]. A block of zeros (or one whose scale underflows to 0) has scale 0
// and decodes to zeros; a block holding a NaN or an infinity decodes to NaN everywhere, so a
// non-finite value is never laundered into a finite one.
struct QuantFormat {
  QuantBits bits = QuantBits::kNone;
  std::uint32_t block = kDefaultWeightQuantBlock;

  bool enabled() const { return bits != QuantBits::kNone; }
  // Every disabled format is the same "off", whatever its block.
  bool operator==(const QuantFormat& o) const {
    return (!enabled() && !o.enabled()) || (bits == o.bits && block == o.block);
  }
};

// Q: the largest code magnitude (127 for int8, 7 for int4, 0 for none).
constexpr int quant_max_code(QuantBits bits) {
  return bits == QuantBits::kInt8 ? 127 : bits == QuantBits::kInt4 ? 7 : 0;
}

std::size_t quant_block_count(QuantFormat f, std::size_t n);  // ceil(n / block)
std::size_t quant_code_bytes(QuantFormat f, std::size_t n);   // ceil(n * bits / 8)
std::size_t quantized_bytes(QuantFormat f, std::size_t n);    // 4 * blocks + code bytes

// "int8", "int4", "none"
std::string_view quant_bits_name(QuantBits bits);
// Accepts int8, int4, none; throws strata::Error naming `what` and the accepted values.
QuantBits parse_quant_bits(std::string_view text, std::string_view what);
// Throws strata::Error unless kMinQuantBlock <= block <= kMaxQuantBlock and block is even.
void validate_quant_block(std::uint64_t block, std::string_view what);
// "int8/256"
std::string describe_quant(QuantFormat f);

}  // namespace strata
