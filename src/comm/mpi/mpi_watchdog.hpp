// The collective watchdog: every blocking MPI call runs inside a MpiWatch scope, and a watchdog
// thread ends the whole job (MPI_Abort) with the call's name when one has not returned within
// the timeout, so a dead, stopped (SIGSTOP) or unreachable peer never leaves the others waiting
// forever. Off until started; `--collective-timeout` sets it.
#pragma once

namespace strata {

class MpiWatch {
 public:
  explicit MpiWatch(const char* call);
  ~MpiWatch();
  MpiWatch(const MpiWatch&) = delete;
  MpiWatch& operator=(const MpiWatch&) = delete;
};

// Starts (or retunes) the watchdog thread; seconds <= 0 stops watching.
void start_mpi_watchdog(double seconds);
void stop_mpi_watchdog();

}  // namespace strata
