// The multi-rank plan benchmark behind `strata_bench plans`.
#pragma once

#include <string>
#include <vector>

#include "comm/mpi/mpi_runtime.hpp"

namespace strata {

struct PlanBenchSettings {
  std::string model = "tiny";
  int vocab = 0;
  std::string topology = "gcd:2,gpu:2,node:2";
  std::vector<std::string> plans;
  std::string dtype = "bf16";
  int batch = 1;
  int seq_len = 64;
  int grad_accum = 2;
  int steps = 5;
  int warmup = 1;
};

// Collective: every rank calls it; rank 0 prints.
void bench_plans(const PlanBenchSettings& settings);

}  // namespace strata
