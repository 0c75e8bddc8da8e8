// The collective watchdog: every blocking MPI call runs inside a MpiWatch scope, and a watchdog
// thread ends the whole job (MPI_Abort) with the call's name when one has not returned within
// the timeout, so a dead, stopped (SIGSTOP) or unreachable peer never leaves the others waiting
// forever. Off until started; `--collective-timeout` sets it. The message names the hosts of the
// ranks the call waits on, so a lost node or cut link is named.
#pragma once

#include <string>
#include <vector>

namespace strata {

class MpiWatch {
 public:
  // `waits_on`: the hosts of the call's other ranks, as "host a" or "hosts a, b", or "" when they
  // share this host; it must outlive the scope. Null: the job's other hosts.
  explicit MpiWatch(const char* call, const char* waits_on = nullptr);
  ~MpiWatch();
  MpiWatch(const MpiWatch&) = delete;
  MpiWatch& operator=(const MpiWatch&) = delete;
};

// Starts (or retunes) the watchdog thread; seconds <= 0 stops watching.
void start_mpi_watchdog(double seconds);
void stop_mpi_watchdog();

// This rank's host and the job's other hosts, for the message (set once at start-up).
void set_watchdog_hosts(const std::string& own_host, const std::string& other_hosts);

// "host a" or "hosts a, b" for the distinct names other than `own` (empty when none).
std::string describe_other_hosts(const std::vector<std::string>& hosts, const std::string& own);

// MPI_Abort, bounded: when the abort cannot reach the launcher (a cut link), the process still
// exits with `code` a few seconds later rather than hang.
[[noreturn]] void abort_mpi_job(int code);

}  // namespace strata
