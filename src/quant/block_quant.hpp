// Block quantization kernels (format: quant/quant_format.hpp): fp32 or bf16 to a quantized blob
// and back, plus decode-and-accumulate for the reduction's fp32 sums. A scalar reference and
// AVX2 and AVX-512 paths chosen at run time; every path gives the same bits as the reference.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/bf16.hpp"
#include "quant/quant_format.hpp"

namespace strata {

enum class QuantIsa { kScalar, kAvx2, kAvx512 };

// Compiled in and supported by this CPU.
bool quant_isa_supported(QuantIsa isa);
// The fastest supported path (what the collectives use).
QuantIsa quant_isa_best();
std::string_view quant_isa_name(QuantIsa isa);

// `in`: n elements; `blob`: quantized_bytes(f, n) bytes. Blocks are independent, so large runs
// are split over the OpenMP threads by block; the bits do not depend on the split.
void quantize_blocks(QuantFormat f, const float* in, std::size_t n, void* blob, QuantIsa isa = quant_isa_best());
void quantize_blocks(QuantFormat f, const bf16* in, std::size_t n, void* blob, QuantIsa isa = quant_isa_best());
void dequantize_blocks(QuantFormat f, const void* blob, std::size_t n, float* out, QuantIsa isa = quant_isa_best());
// Decodes in fp32, then rounds to bf16 as to_bf16 does.
void dequantize_blocks(QuantFormat f, const void* blob, std::size_t n, bf16* out, QuantIsa isa = quant_isa_best());
// accum[i] += decoded[i], in fp32 (a multiply then an add, never fused).
void dequantize_add_blocks(QuantFormat f, const void* blob, std::size_t n, float* accum,
                           QuantIsa isa = quant_isa_best());

}  // namespace strata
