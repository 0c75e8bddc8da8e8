// Sizes and names of the block-quantization format.
#include "quant/quant_format.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace strata {

std::size_t quant_block_count(QuantFormat f, std::size_t n) {
  STRATA_CHECK(f.enabled() && f.block > 0, "block counts of an unquantized format");
  return (n + f.block - 1) / f.block;
}

std::size_t quant_code_bytes(QuantFormat f, std::size_t n) {
  return (n * static_cast<std::size_t>(f.bits) + 7) / 8;
}

std::size_t quantized_bytes(QuantFormat f, std::size_t n) {
  return quant_block_count(f, n) * sizeof(float) + quant_code_bytes(f, n);
}

std::string_view quant_bits_name(QuantBits bits) {
  switch (bits) {
    case QuantBits::kNone: return "none";
    case QuantBits::kInt4: return "int4";
    case QuantBits::kInt8: return "int8";
  }
  return "?";
}

QuantBits parse_quant_bits(std::string_view text, std::string_view what) {
  if (text == "int8") return QuantBits::kInt8;
  if (text == "int4") return QuantBits::kInt4;
  if (text == "none") return QuantBits::kNone;
  fail("{}: '{}' is not a quantization (int8, int4 or none)", what, text);
}

void validate_quant_block(std::uint64_t block, std::string_view what) {
  STRATA_REQUIRE(block >= kMinQuantBlock && block <= kMaxQuantBlock && block % 2 == 0,
                 "{}: a quantization block of {} elements; it must be even and between {} and {}", what, block,
                 kMinQuantBlock, kMaxQuantBlock);
}

std::string describe_quant(QuantFormat f) {
  if (!f.enabled()) return "none";
  return fmt::format("{}/{}", quant_bits_name(f.bits), f.block);
}

}  // namespace strata
