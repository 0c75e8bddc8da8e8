// The watchdog: one atomic slot (MPI_THREAD_SERIALIZED: one thread in MPI at a time), polled.
#include "comm/mpi/mpi_watchdog.hpp"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>
#include <unistd.h>

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
std::atomic<const char*> g_waits_on{nullptr};
std::string g_own_host = "?", g_other_hosts;  // written once, before the thread starts

constexpr int kAbortGraceSeconds = 5;

void watch_loop() {
  while (g_running.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::int64_t since = g_since_ms.load(), timeout = g_timeout_ms.load();
    if (since == 0 || timeout <= 0 || now_ms() - since < timeout) continue;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char* call = g_call.load();
    const char* peers = g_waits_on.load();
    const std::string where = peers == nullptr ? g_other_hosts : peers;
    std::fprintf(stderr,
                 "strata: error on rank %d (host %s): %s has not returned in %.1f s (--collective-timeout): a rank it "
                 "waits on (%s) is dead, stopped or unreachable; ending the job\n",
                 rank, g_own_host.c_str(), call ? call : "an MPI call", static_cast<double>(timeout) / 1e3,
                 where.empty() ? "on this host" : ("on " + where).c_str());
    std::fflush(stderr);
    abort_mpi_job(kExitFailure);
  }
}

}  // namespace

MpiWatch::MpiWatch(const char* call, const char* waits_on) {
  if (g_depth.fetch_add(1) == 0) {
    g_call.store(call);
    g_waits_on.store(waits_on);
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

void set_watchdog_hosts(const std::string& own_host, const std::string& other_hosts) {
  g_own_host = own_host;
  g_other_hosts = other_hosts;
}

std::string describe_other_hosts(const std::vector<std::string>& hosts, const std::string& own) {
  std::set<std::string> others(hosts.begin(), hosts.end());
  others.erase(own);
  std::string text;
  for (const std::string& h : others) text += (text.empty() ? "" : ", ") + h;
  if (text.empty()) return text;
  return (others.size() == 1 ? "host " : "hosts ") + text;
}

void abort_mpi_job(int code) {
  std::thread([code] {
    std::this_thread::sleep_for(std::chrono::seconds(kAbortGraceSeconds));
    std::fprintf(stderr, "strata: MPI_Abort did not end this rank in %d s (the launcher is unreachable); exiting\n",
                 kAbortGraceSeconds);
    std::fflush(stderr);
    _exit(code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, code);
  _exit(code);
}

}  // namespace strata
