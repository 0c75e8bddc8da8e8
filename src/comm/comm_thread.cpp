// The communication thread's queue, its tasks and their completion, and the inline mode.
#include "comm/comm_thread.hpp"

#include <chrono>

#include "core/error.hpp"
#include "core/threads.hpp"

namespace strata {

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct CommThread::Task {
  std::string name;
  std::function<void()> work;
  bool done = false;  // guarded by the thread's mutex
  std::exception_ptr error;
};

namespace {

class TaskRequest final : public CommRequest {
 public:
  explicit TaskRequest(std::function<void()> wait_for) : wait_for_(std::move(wait_for)) {}
  void wait() override {
    if (!wait_for_) return;
    auto wait_for = std::move(wait_for_);
    wait_for_ = nullptr;
    wait_for();
  }
  // A task still queued refers to buffers its poster owns: wait for it even when abandoned, unless
  // an exception is unwinding (the job is about to abort; the peers may never join it).
  ~TaskRequest() override {
    if (wait_for_ && std::uncaught_exceptions() == 0) {
      try {
        wait();
      } catch (...) {
      }
    }
  }

 private:
  std::function<void()> wait_for_;
};

}  // namespace

CommThread::CommThread(Options options) : options_(options), delays_(options.seed + 0x9E3779B97F4A7C15ull) {
  if (options_.threaded) thread_ = std::thread([this] { loop(); });
}

CommThread::~CommThread() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void CommThread::add_exposed(std::int64_t ns) {
  const std::lock_guard<std::mutex> lock(mutex_);
  exposed_ns_ += ns;
}

void CommThread::execute(Task& task) {
  if (options_.max_delay_us > 0) {
    std::this_thread::sleep_for(
        std::chrono::microseconds(delays_.below(static_cast<std::uint64_t>(options_.max_delay_us) + 1)));
  }
  const std::int64_t begin = steady_now_ns();
  try {
    task.work();
  } catch (...) {
    task.error = std::current_exception();
  }
  const std::int64_t end = steady_now_ns();
  const std::lock_guard<std::mutex> lock(mutex_);
  if (options_.record_spans) spans_.push_back({task.name, begin, end});
  busy_ns_ += end - begin;
  ++tasks_;
}

std::unique_ptr<CommRequest> CommThread::post(std::string name, std::function<void()> work) {
  auto task = std::make_shared<Task>();
  task->name = std::move(name);
  task->work = std::move(work);
  if (!threaded()) {
    // Inline: the whole task is exposed; its error surfaces at wait, as on the thread. Tasks
    // queued before the switch to inline run first, in order.
    const std::int64_t begin = steady_now_ns();
    if (options_.threaded) {
      std::unique_lock<std::mutex> lock(mutex_);
      run_queued_until(lock, [&] { return queue_.empty() && !running_; });
    }
    execute(*task);
    add_exposed(steady_now_ns() - begin);
    task->work = nullptr;
    return std::make_unique<TaskRequest>([task] {
      if (task->error) std::rethrow_exception(task->error);
    });
  }
  enqueue(task, true);
  return std::make_unique<TaskRequest>([this, task] { wait_for(*task); });
}

void CommThread::enqueue(const std::shared_ptr<Task>& task, bool wake_thread) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    STRATA_CHECK(!stopping_, "a task posted to a stopping communication thread");
    queue_.push_back(task);
  }
  if (wake_thread) wake_.notify_one();
}

// Blocked anyway, the poster runs the queued tasks itself, in order, up to its own whenever the
// communication thread is idle: that saves two thread hand-offs per task (most of a small
// collective's cost where cores are shared), and one task at a time still runs (MPI is
// initialised MPI_THREAD_SERIALIZED).
void CommThread::wait_for(Task& task) {
  const std::int64_t begin = steady_now_ns();
  pacer_.set_eager(true);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    run_queued_until(lock, [&] { return task.done; });
  }
  pacer_.set_eager(false);
  add_exposed(steady_now_ns() - begin);
  if (task.error) std::rethrow_exception(task.error);
}

template <typename Done>
void CommThread::run_queued_until(std::unique_lock<std::mutex>& lock, Done done) {
  while (!done()) {
    if (running_ || queue_.empty()) {
      done_.wait(lock);
      continue;
    }
    const std::shared_ptr<Task> next = queue_.front();
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    execute(*next);
    next->work = nullptr;
    lock.lock();
    running_ = false;
    next->done = true;
    done_.notify_all();
    wake_.notify_one();  // the thread may be waiting for the queue to be its own again
  }
}

void CommThread::set_threaded(bool threaded) {
  STRATA_REQUIRE(!threaded || options_.threaded, "a communication thread made inline cannot become threaded");
  if (!options_.threaded) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  inline_ = !threaded;
}

bool CommThread::threaded() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return options_.threaded && !inline_;
}

void CommThread::run(std::string name, std::function<void()> work) {
  if (!threaded()) {
    post(std::move(name), std::move(work))->wait();
    return;
  }
  // Waited for at once: queued without waking the thread, so the poster usually runs it itself.
  auto task = std::make_shared<Task>();
  task->name = std::move(name);
  task->work = std::move(work);
  enqueue(task, false);
  wait_for(*task);
}

std::vector<TaskSpan> CommThread::spans() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return spans_;
}

double CommThread::busy_seconds() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<double>(busy_ns_) * 1e-9;
}

double CommThread::exposed_seconds() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<double>(exposed_ns_) * 1e-9;
}

std::uint64_t CommThread::tasks_run() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return tasks_;
}

void CommThread::loop() {
  compute_on_this_thread_only("strata-comm");
  ProgressPacer::install(&pacer_);
  for (;;) {
    std::shared_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !running_); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = queue_.front();
      queue_.pop_front();
      running_ = true;
    }
    execute(*task);
    task->work = nullptr;  // drop what the closure holds before the poster is told
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
      task->done = true;
    }
    done_.notify_all();
  }
}

}  // namespace strata
