// Where collectives run: on a dedicated communication thread, tasks one at a time in the order
// posted while the posting (compute) thread goes on; or inline, each task run by post() itself
// (overlap off). A poster that waits for a task not yet started runs it (and any before it) itself
// when the thread is idle. Every rank posts the same tasks in the same order (the schedule is the same list
// everywhere), so the collectives inside them line up across ranks. It measures the time tasks
// ran (communication) and the time the poster spent blocked on them (exposed communication), and
// can record each task's span for a timeline.
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
#include "comm/progress_pacer.hpp"
#include "core/rng.hpp"

namespace strata {

// When a task ran, in nanoseconds of the steady clock.
struct TaskSpan {
  std::string name;
  std::int64_t begin_ns = 0, end_ns = 0;
};

std::int64_t steady_now_ns();

class CommThread {
 public:
  struct Options {
    bool threaded = true;       // false: run every task inline, in post()
    bool record_spans = false;  // keep each task's span (for a timeline)
    // > 0: before each task, sleep a random 0..max_delay_us microseconds drawn from a generator
    // seeded by `seed` (a test mode: collectives then start at different times on every rank,
    // which must change nothing but the timing).
    int max_delay_us = 0;
    std::uint64_t seed = 0;
  };
  explicit CommThread(Options options);
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `work`; the request's wait() blocks until it has run and rethrows what it threw.
  std::unique_ptr<CommRequest> post(std::string name, std::function<void()> work);
  // post(...)->wait().
  void run(std::string name, std::function<void()> work);

  // Whether tasks now go to the thread. A threaded CommThread can be switched to inline and back
  // (--overlap auto's trial); tasks already queued still run before any later one.
  bool threaded() const;
  void set_threaded(bool threaded);
  // Spans of the tasks run so far; empty unless record_spans.
  std::vector<TaskSpan> spans() const;
  // Seconds tasks ran, and seconds the posting thread was blocked on them (in wait(), run(), or
  // an inline post()), since the start.
  double busy_seconds() const;
  double exposed_seconds() const;
  std::uint64_t tasks_run() const;

 private:
  struct Task;
  void loop();
  void execute(Task& task);  // on the thread, or inline
  void add_exposed(std::int64_t ns);
  void enqueue(const std::shared_ptr<Task>& task, bool wake_thread);
  void wait_for(Task& task);  // the poster's side of a request: may run queued tasks itself
  template <typename Done>
  void run_queued_until(std::unique_lock<std::mutex>& lock, Done done);

  Options options_;
  Rng delays_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;  // the thread: a task queued, the queue free again, or stopping
  std::condition_variable done_;  // the poster: a task finished
  std::deque<std::shared_ptr<Task>> queue_;
  std::vector<TaskSpan> spans_;
  std::int64_t busy_ns_ = 0, exposed_ns_ = 0;
  std::uint64_t tasks_ = 0;
  bool stopping_ = false;
  bool running_ = false;  // a task is executing, on the thread or on the poster
  bool inline_ = false;   // a threaded CommThread switched to running tasks in post()
  ProgressPacer pacer_;   // eager while the poster waits
  std::thread thread_;  // last: it starts once everything above exists
};

}  // namespace strata
