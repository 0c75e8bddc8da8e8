// OpenBLAS's OpenMP build takes its thread count from the same runtime, but it caches it at load
// time, so both are set explicitly.
#include "core/threads.hpp"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>

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

}  // namespace strata
