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

// The hardware threads this process may run on (its CPU affinity: a launcher that binds a rank
// to one core leaves it one), and the machine's.
int usable_hardware_threads();
int host_hardware_threads();

// Whether a communication thread gets a hardware thread of its own beside `compute_threads` on
// each of `ranks_on_host` ranks. Without one it only takes turns with compute on a shared core:
// it hides nothing of the collective's own work and adds two hand-offs per collective. The
// engine (--overlap auto) and strata calibrate's device verdict both follow this one rule.
bool spare_core_for_communication(int compute_threads, int ranks_on_host);

}  // namespace strata
