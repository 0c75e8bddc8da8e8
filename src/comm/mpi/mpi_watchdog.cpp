// The watchdog: one atomic slot (MPI_THREAD_SERIALIZED: one thread in MPI at a time), polled.
#include "comm/mpi/mpi_watchdog.hpp"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/exit_codes.hpp"

namespace strata {

namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::atomic<std::int64_t> g_since_ms{0};   // 0: no call in progress
std::atomic<const char*> g_call{nullptr};
std::atomic<int> g_depth{0};
std::atomic<std::int64_t> g_timeout_ms{0};
std::atomic<bool> g_running{false};

void watch_loop() {
  while (g_running.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::int64_t since = g_since_ms.load(), timeout = g_timeout_ms.load();
    if (since == 0 || timeout <= 0 || now_ms() - since < timeout) continue;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char* call = g_call.load();
    std::fprintf(stderr,
                 "strata: error on rank %d: %s has not returned in %.1f s (--collective-timeout): a peer rank is "
                 "dead, stopped or unreachable; ending the job\n",
                 rank, call ? call : "an MPI call", static_cast<double>(timeout) / 1e3);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitFailure);
  }
}

}  // namespace

MpiWatch::MpiWatch(const char* call) {
  if (g_depth.fetch_add(1) == 0) {
    g_call.store(call);
    g_since_ms.store(now_ms());
  }
}

MpiWatch::~MpiWatch() {
  if (g_depth.fetch_sub(1) == 1) g_since_ms.store(0);
}

void start_mpi_watchdog(double seconds) {
  g_timeout_ms.store(static_cast<std::int64_t>(seconds * 1e3));
  if (seconds <= 0.0 || g_running.exchange(true)) return;
  // Detached: an exit from any path (an error, MPI_Abort) must not wait for or trip over it.
  std::thread(watch_loop).detach();
}

void stop_mpi_watchdog() {
  g_timeout_ms.store(0);
  g_running.store(false);
}

}  // namespace strata
