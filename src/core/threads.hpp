// Sets the worker-thread count shared by Strata's OpenMP kernels and OpenBLAS.
#pragma once

namespace strata {

// n <= 0 keeps the OpenMP default (OMP_NUM_THREADS or the core count).
void set_thread_count(int n);
int thread_count();

}  // namespace strata
