// The stop signals' watcher thread, and the plain-handler fallback.
#include "core/stop_signals.hpp"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <iterator>
#include <thread>

namespace strata {

namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1, SIGUSR2};

std::atomic<int> g_received{0};
std::atomic<bool> g_accepting{false};
std::atomic<bool> g_routed{false};

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  for (const int s : kStopSignals) sigaddset(&set, s);
  return set;
}

// Outside a run the signal does what it would have done had nothing been installed: end the process.
void act_by_default(int signal) {
  std::signal(signal, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(signal);
}

// Async-signal-safe: where some thread (one made by a library that reset its mask) takes the signal
// itself rather than leaving it to the watcher.
extern "C" void record_stop(int signal) {
  if (g_accepting.load()) {
    g_received = signal;
  } else {
    act_by_default(signal);
  }
}

void watch() {
  const sigset_t set = stop_set();
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0) continue;
    record_stop(signal);
  }
}

}  // namespace

void route_stop_signals_to_a_watcher() {
  if (g_routed.exchange(true)) return;
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  for (const int s : kStopSignals) std::signal(s, record_stop);
  std::thread(watch).detach();
}

StopRequests::StopRequests() : routed_(g_routed.load()) {
  g_received = 0;
  g_accepting = true;
  if (!routed_) {
    for (std::size_t i = 0; i < std::size(kStopSignals); ++i) previous_[i] = std::signal(kStopSignals[i], record_stop);
  }
}

StopRequests::~StopRequests() {
  g_accepting = false;
  if (!routed_) {
    for (std::size_t i = 0; i < std::size(kStopSignals); ++i) std::signal(kStopSignals[i], previous_[i]);
  }
}

int StopRequests::received() { return g_received.load(); }

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "a signal";
  }
}

}  // namespace strata
