// Sets the worker-thread count shared by Strata's OpenMP kernels and OpenBLAS.
#pragma once

namespace strata {

// n <= 0 keeps the OpenMP default (OMP_NUM_THREADS or the core count). For the calling thread
// (OpenMP's thread count is per thread) and OpenBLAS (process-wide).
void set_thread_count(int n);
int thread_count();

// A helper thread (the communication thread) computes alone: its OpenMP regions run on itself,
// not on a team of the default size, which would spin on every core beside the compute thread's
// own team whatever --threads says. Called by that thread; also names it (for /proc and debuggers).
void compute_on_this_thread_only(const char* name);

}  // namespace strata
