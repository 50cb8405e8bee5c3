#include "engine/thread_pool.h"

#include <algorithm>

#include "ignis/error.h"

namespace ignis::engine {
namespace {

// About 50 microseconds of polling: longer than the gap between two calls of one decode step,
// far shorter than the gap between two requests.
constexpr int kSpinIterations = 20000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  check_arg(threads >= 1, "ThreadPool", "threads", ">= 1", threads);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker_loop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    std::uint64_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinIterations; ++spin) {
      cpu_relax();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load()) return;
    try {
      (*job_)(index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int)>& fn) {
  if (workers_.empty()) return fn(0);
  job_ = &fn;
  error_ = nullptr;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_release);
  {
    // Under the lock, so a worker between its predicate check and its wait cannot miss this.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  std::exception_ptr own;
  try {
    fn(0);
  } catch (...) {
    own = std::current_exception();
  }
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations)
      cpu_relax();
    else
      std::this_thread::yield();
  }
  job_ = nullptr;
  if (own) std::rethrow_exception(own);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::parallel_for(std::int64_t n, std::int64_t grain,
                              const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t units = (n + grain - 1) / grain;
  const std::int64_t parts = std::min<std::int64_t>(size(), units);
  if (parts <= 1) return fn(0, n);
  run([&](int t) {
    if (t >= parts) return;
    const std::int64_t begin = std::min(n, units * t / parts * grain);
    const std::int64_t end = std::min(n, units * (t + 1) / parts * grain);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace ignis::engine
