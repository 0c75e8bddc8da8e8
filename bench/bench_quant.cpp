// strata_bench quant: the block quantization kernels' bandwidth on one thread against memcpy of the
// same bytes, per path (scalar, AVX2, AVX-512), and a sweep of block sizes with the round-trip
// error each gives on Gaussian data: the kernel side of choosing the default block size.
#include "bench/bench_quant.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/bf16.hpp"
#include "core/median.hpp"
#include "core/rng.hpp"
#include "core/stopwatch.hpp"
#include "core/threads.hpp"
#include "quant/block_quant.hpp"

namespace strata {
namespace {

// Median seconds of `repeats` calls after one unmeasured call (which also faults the pages in).
double median_seconds(int repeats, const std::function<void()>& run) {
  run();
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    Stopwatch watch;
    run();
    seconds.push_back(watch.seconds());
  }
  return median(seconds);
}

struct Buffers {
  explicit Buffers(std::size_t n)
      : n(n), in(n), in_bf16(n), out(n), out_bf16(n), accum(n),
        blob(quantized_bytes({QuantBits::kInt8, kMinQuantBlock}, n)) {}
  std::size_t n;
  AlignedBuffer<float> in;
  AlignedBuffer<bf16> in_bf16;
  AlignedBuffer<float> out;
  AlignedBuffer<bf16> out_bf16;
  AlignedBuffer<float> accum;
  AlignedBuffer<unsigned char> blob;  // the largest format's size: int8 in the smallest blocks
};

double rms_relative_error(const AlignedBuffer<float>& x, const AlignedBuffer<float>& y) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - y[i];
    err += d * d;
    norm += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(err / norm);
}

void print(const nlohmann::json& line) { fmt::print("{}\n", line.dump()); }

}  // namespace

void bench_quant(const QuantBenchSettings& s) {
  const int saved_threads = thread_count();
  set_thread_count(1);  // the kernels' own OpenMP split would otherwise spread the measurement
  const std::size_t n = s.mib * (1u << 20) / sizeof(float);
  Buffers b(n);
  Rng rng(17);
  for (std::size_t i = 0; i < n; ++i) b.in[i] = static_cast<float>(rng.normal());
  fp32_to_bf16(b.in_bf16.data(), b.in.data(), n);
  const double fp32_bytes = static_cast<double>(n) * sizeof(float);

  AlignedBuffer<float> copy(n);
  const double memcpy_s = median_seconds(s.repeats, [&] { std::memcpy(copy.data(), b.in.data(), n * sizeof(float)); });
  const double memcpy_gbs = fp32_bytes / memcpy_s / 1e9;
  print({{"bench", "quant_memcpy"}, {"bytes", fp32_bytes}, {"threads", 1}, {"median_ms", memcpy_s * 1e3},
         {"gb_per_s", memcpy_gbs}});

  const QuantFormat i8{QuantBits::kInt8, kDefaultWeightQuantBlock}, i4{QuantBits::kInt4, kDefaultGradQuantBlock};
  struct Kernel {
    std::string op, from, to;
    const char* counted;  // whose bytes the rate counts
    double bytes;
    std::function<void(QuantIsa)> run;
  };
  const double bf16_bytes = static_cast<double>(n) * sizeof(bf16);
  // The decodes read blobs made by the same path first (any path's blob is the same bytes).
  const std::vector<Kernel> kernels = {
      {"quantize", "fp32", "int8", "input", fp32_bytes,
       [&](QuantIsa isa) { quantize_blocks(i8, b.in.data(), n, b.blob.data(), isa); }},
      {"quantize", "fp32", "int4", "input", fp32_bytes,
       [&](QuantIsa isa) { quantize_blocks(i4, b.in.data(), n, b.blob.data(), isa); }},
      {"quantize", "bf16", "int8", "input", bf16_bytes,
       [&](QuantIsa isa) { quantize_blocks(i8, b.in_bf16.data(), n, b.blob.data(), isa); }},
      {"dequantize", "int8", "fp32", "output", fp32_bytes,
       [&](QuantIsa isa) { dequantize_blocks(i8, b.blob.data(), n, b.out.data(), isa); }},
      {"dequantize", "int4", "fp32", "output", fp32_bytes,
       [&](QuantIsa isa) { dequantize_blocks(i4, b.blob.data(), n, b.out.data(), isa); }},
      {"dequantize", "int4", "bf16", "output", bf16_bytes,
       [&](QuantIsa isa) { dequantize_blocks(i4, b.blob.data(), n, b.out_bf16.data(), isa); }},
      {"dequantize_add", "int4", "fp32", "output", fp32_bytes,
       [&](QuantIsa isa) { dequantize_add_blocks(i4, b.blob.data(), n, b.accum.data(), isa); }},
  };
  for (QuantIsa isa : {QuantIsa::kScalar, QuantIsa::kAvx2, QuantIsa::kAvx512}) {
    if (!quant_isa_supported(isa)) continue;
    for (const Kernel& k : kernels) {
      const QuantFormat f = k.from == "int8" || k.to == "int8" ? i8 : i4;
      if (k.op != "quantize") quantize_blocks(f, b.in.data(), n, b.blob.data(), isa);
      const double sec = median_seconds(s.repeats, [&] { k.run(isa); });
      const double gbs = k.bytes / sec / 1e9;
      print({{"bench", "quant"}, {"op", k.op}, {"from", k.from}, {"to", k.to}, {"isa", quant_isa_name(isa)},
             {"best", isa == quant_isa_best()}, {"block", f.block}, {"elements", n}, {"threads", 1},
             {"counted", k.counted}, {"median_ms", sec * 1e3}, {"gb_per_s", gbs},
             {"gelem_per_s", static_cast<double>(n) / sec / 1e9}, {"of_memcpy", gbs / memcpy_gbs}});
    }
  }

  // The block size trades the scale's 4 bytes per block against how closely a block's amax fits
  // its elements: both sides of that, on the path the collectives use.
  const QuantIsa best = quant_isa_best();
  for (QuantBits bits : {QuantBits::kInt8, QuantBits::kInt4}) {
    for (std::uint32_t block : {64u, 128u, 256u, 512u, 1024u, 2048u, 4096u, 8192u}) {
      const QuantFormat f{bits, block};
      const double q_sec =
          median_seconds(s.repeats, [&] { quantize_blocks(f, b.in.data(), n, b.blob.data(), best); });
      const double d_sec =
          median_seconds(s.repeats, [&] { dequantize_blocks(f, b.blob.data(), n, b.out.data(), best); });
      print({{"bench", "quant_block"}, {"bits", quant_bits_name(bits)}, {"block", block},
             {"isa", quant_isa_name(best)}, {"threads", 1}, {"data", "gaussian"},
             {"quantize_gb_per_s", fp32_bytes / q_sec / 1e9}, {"dequantize_gb_per_s", fp32_bytes / d_sec / 1e9},
             {"quantize_of_memcpy", fp32_bytes / q_sec / 1e9 / memcpy_gbs},
             {"bytes_per_element", static_cast<double>(quantized_bytes(f, n)) / static_cast<double>(n)},
             {"rms_rel_error", rms_relative_error(b.in, b.out)}});
    }
  }
  set_thread_count(saved_threads);
}

}  // namespace strata
