// Internal to src/quant: the per-ISA kernels behind block_quant.hpp, each working on a range of
// whole blocks so that block_quant.cpp can hand disjoint ranges to OpenMP threads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::quant_detail {

// A range starts on a block boundary and holds n elements: whole blocks, except that the last
// may be partial (only when the range ends the run). `scales` points at the range's first scale
// and `codes` at its first block's codes, both inside one blob and possibly unaligned. q is the
// largest code (127 or 7), which also names the code width: the kernels receive it, not the enum,
// so that the vector files need nothing from the format header inside their target regions.
struct Kernels {
  void (*quantize_f32)(int q, std::uint32_t block, const float* in, std::size_t n, unsigned char* scales,
                       unsigned char* codes);
  void (*quantize_bf16)(int q, std::uint32_t block, const std::uint16_t* in, std::size_t n, unsigned char* scales,
                        unsigned char* codes);
  void (*dequantize_f32)(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                         std::size_t n, float* out);
  void (*dequantize_bf16)(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                          std::size_t n, std::uint16_t* out);
  void (*dequantize_add)(int q, std::uint32_t block, const unsigned char* scales, const unsigned char* codes,
                         std::size_t n, float* accum);
};

extern const Kernels kScalarKernels;
// Defined only on x86-64 builds; block_quant.cpp never selects them elsewhere.
extern const Kernels kAvx2Kernels;
extern const Kernels kAvx512Kernels;

}  // namespace strata::quant_detail
