// Stop requests by signal (SIGINT, SIGTERM, SIGUSR1, SIGUSR2: "save at the end of this step and
// stop") that never run a handler on a compute thread. oneDNN's JIT gemm kernels point the stack
// register into the heap while they run (oneDNN issue 4845), so a handler entered there writes its
// frame over heap memory; reproduced here with oneDNN 2.6 (dnnl_sgemm under SIGUSR1 aborts with
// "corrupted size vs. prev_size"). The process therefore blocks these signals in every thread (the
// mask is inherited by MPI's, OpenMP's and oneDNN's threads) and one watcher thread takes them.
#pragma once

namespace strata {

// Call first in main, before any other thread exists. Without it (tests, library use) a
// StopRequests falls back to plain handlers.
void route_stop_signals_to_a_watcher();

// For its lifetime a stop signal is recorded, not acted on; outside one, the signal ends the
// process as its default action does. Restores what was there before, also on an exception.
class StopRequests {
 public:
  StopRequests();
  ~StopRequests();
  StopRequests(const StopRequests&) = delete;
  StopRequests& operator=(const StopRequests&) = delete;

  // The signal received since this object was made (0: none).
  static int received();

 private:
  void (*previous_[4])(int) = {};
  bool routed_ = false;
};

const char* stop_signal_name(int signal);

}  // namespace strata
