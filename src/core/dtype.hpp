// Element types Strata stores and moves, with their sizes and names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata {

// kU8: raw bytes, the wire type of quantized blobs (quant/quant_format.hpp).
enum class DType : std::uint32_t { kF32 = 0, kI32 = 1, kF64 = 2, kBF16 = 3, kU8 = 4 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kI32: return 4;
    case DType::kF64: return 8;
    case DType::kBF16: return 2;
    case DType::kU8: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kI32: return "i32";
    case DType::kF64: return "f64";
    case DType::kBF16: return "bf16";
    case DType::kU8: return "u8";
  }
  return "unknown";
}

constexpr bool dtype_is_known(std::uint32_t code) { return code <= 4; }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kF32; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::kI32; }
template <> constexpr DType dtype_of<double>() { return DType::kF64; }

}  // namespace strata
