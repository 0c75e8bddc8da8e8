// The single-threaded block quantization benchmark behind `strata_bench quant`.
#pragma once

#include <cstddef>

namespace strata {

struct QuantBenchSettings {
  // Of fp32 input: past the caches (this VM reports a 480 MiB L3; at 32 MiB memcpy ran from it), so
  // memory bandwidth is what is met.
  std::size_t mib = 512;
  int repeats = 9;
};

// Prints one JSON line per measurement: memcpy, each kernel on each supported path, and the block
// size sweep (throughput and round-trip error). Runs on one thread and restores the count after.
void bench_quant(const QuantBenchSettings& settings);

}  // namespace strata
