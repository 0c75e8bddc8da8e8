// A dedicated communication thread: collectives posted as tasks run one at a time, in the order
// posted, while the posting (compute) thread goes on. Every rank posts the same tasks in the same
// order (the schedule is the same list everywhere), so the collectives inside them line up across
// ranks. Each task records when it ran, for the timeline and the exposed-communication figure.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"

namespace strata {

// When a task ran, in nanoseconds of the steady clock.
struct TaskSpan {
  std::string name;
  std::int64_t begin_ns = 0, end_ns = 0;
};

std::int64_t steady_now_ns();

class CommThread {
 public:
  // max_delay_us > 0: before each task, sleep a random 0..max_delay_us microseconds drawn from a
  // generator seeded by `seed` (a test mode: collectives then start at different times on every
  // rank, which must change nothing but the timing).
  explicit CommThread(std::uint64_t seed = 0, int max_delay_us = 0);
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `work`; the request's wait() blocks until it has run and rethrows what it threw.
  std::unique_ptr<CommRequest> post(std::string name, std::function<void()> work);
  // post(...)->wait().
  void run(std::string name, std::function<void()> work);

  // Spans of the tasks run so far (taken: the record is emptied).
  std::vector<TaskSpan> take_spans();
  // Seconds the thread spent running tasks since it started.
  double busy_seconds() const;

 private:
  struct Task;
  void loop();

  std::uint64_t seed_;
  int max_delay_us_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Task>> queue_;
  std::vector<TaskSpan> spans_;
  std::int64_t busy_ns_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once everything above exists
};

}  // namespace strata
