// How the communication thread waits for a collective: while compute runs beside it on a shared
// core, it tests for completion between short sleeps instead of spinning in MPI_Wait (Open MPI and
// MPICH busy-poll), so the wait does not take half the core from the compute it hides behind; once
// the compute thread blocks on it, it waits eagerly.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace strata {

class ProgressPacer {
 public:
  // The compute thread is (or is no longer) blocked on communication: wake a pacing waiter.
  void set_eager(bool eager);
  bool eager() const { return eager_.load(std::memory_order_acquire); }

  // One pause between completion tests of a wait begun at `since`: false at once when eager (then
  // wait blocking); otherwise true, at once during the first 100 us (spinning), later after a
  // sleep that grows with the time waited, cut short when the compute thread starts waiting.
  bool pause(std::chrono::steady_clock::time_point since);

  // The pacer of the calling thread (set by the communication thread for itself, which also
  // asks the kernel for exact sleeps); null elsewhere, where waits are eager.
  static ProgressPacer* current();
  static void install(ProgressPacer* pacer);

 private:
  std::atomic<bool> eager_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
};

// Waits through `test` (true when complete) and `block` (a blocking wait), paced by the calling
// thread's pacer when it has one.
template <typename Test, typename Block>
void paced_wait(Test&& test, Block&& block) {
  if (ProgressPacer* pacer = ProgressPacer::current(); pacer != nullptr) {
    const auto since = std::chrono::steady_clock::now();
    while (!test()) {
      if (!pacer->pause(since)) {
        block();
        return;
      }
    }
    return;
  }
  block();
}

}  // namespace strata
