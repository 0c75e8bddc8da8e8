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
  // A cluster file (strata calibrate) or preset: each plan's own schedule is also replayed on it
  // and the simulated ms/step printed beside the measured one. Empty: no simulation.
  std::string cluster;
  std::string overlap = "auto";  // off, on (the thread forced) or auto (as strata train resolves it)
  bool boundary_overlap = true;
};

// Collective: every rank calls it; rank 0 prints.
void bench_plans(const PlanBenchSettings& settings);

struct OverlapBenchSettings {
  std::vector<std::string> models = {"small", "gpt2-124m"};
  std::string plan = "zero3";
  int batch = 2;
  int seq_len = 64;
  int steps = 5;
  int warmup = 1;
};

// Under mpirun: per model, the same run with overlap off and on; one JSON line each from rank 0.
void bench_overlap(const OverlapBenchSettings& settings);

}  // namespace strata
