// The pacing of the communication thread's waits: spin a little, then sleep in growing steps.
#include "comm/progress_pacer.hpp"

#include <algorithm>
#include <chrono>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace strata {

namespace {
thread_local ProgressPacer* t_pacer = nullptr;

// A collective that completes within the spin (every small one over shared memory, where a sleep
// would cost more than it saves) is never paced; one still running after it (waiting on a wire or
// a late peer) is tested between sleeps that double up to the longest, which delays its completion
// by at most that while compute runs, and not at all once compute waits for it.
constexpr std::chrono::microseconds kSpin{100};
constexpr std::chrono::microseconds kFirstPause{20};
constexpr std::chrono::microseconds kLongestPause{640};
}  // namespace

ProgressPacer* ProgressPacer::current() { return t_pacer; }
void ProgressPacer::install(ProgressPacer* pacer) {
  t_pacer = pacer;
#ifdef __linux__
  // The default slack (50 us) would stretch every short pause to 70 us.
  if (pacer != nullptr) prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
}

void ProgressPacer::set_eager(bool eager) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    eager_.store(eager, std::memory_order_release);
  }
  if (eager) wake_.notify_all();
}

bool ProgressPacer::pause(std::chrono::steady_clock::time_point since) {
  if (eager()) return false;
  const auto waited = std::chrono::steady_clock::now() - since;
  if (waited < kSpin) return true;
  auto pause = kFirstPause;
  while (pause < kLongestPause && pause < waited / 4) pause *= 2;
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait_for(lock, pause, [&] { return eager_.load(std::memory_order_acquire); });
  return !eager();
}

}  // namespace strata
