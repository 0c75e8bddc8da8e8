// OpenBLAS's OpenMP build takes its thread count from the same runtime, but it caches it at load
// time, so both are set explicitly.
#include "core/threads.hpp"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <thread>

namespace strata {

void set_thread_count(int n) {
  if (n <= 0) n = omp_get_max_threads();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int thread_count() { return omp_get_max_threads(); }

void compute_on_this_thread_only(const char* name) {
  omp_set_num_threads(1);
  pthread_setname_np(pthread_self(), name);  // at most 15 characters
}

int host_hardware_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

int usable_hardware_threads() {
#ifdef CPU_COUNT
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return host_hardware_threads();
}

bool spare_core_for_communication(int compute_threads, int ranks_on_host) {
  const int per_rank = std::max(1, compute_threads) + 1;
  return usable_hardware_threads() >= per_rank && host_hardware_threads() >= std::max(1, ranks_on_host) * per_rank;
}

}  // namespace strata
