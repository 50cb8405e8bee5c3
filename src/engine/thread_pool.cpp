#include "engine/thread_pool.h"

#include <algorithm>

#include "ignis/error.h"

namespace ignis::engine {
namespace {

// About 50 microseconds of polling: longer than the gap between two calls of one decode step,
// far shorter than the gap between two requests.
constexpr int kSpinIterations = 20000;
constexpr std::uint64_t kClosed = std::uint64_t{1} << 31;
constexpr std::uint64_t kCountMask = kClosed - 1;
// Chunks per thread in parallel_for: enough to rebalance when one thread runs late.
constexpr std::int64_t kChunksPerThread = 4;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

std::uint64_t generation_of(std::uint64_t state) { return state >> 32; }

// Spins, then yields, until done() holds.
template <class Done>
void wait_until(Done done) {
  for (int spin = 0; !done(); ++spin) {
    if (spin < kSpinIterations)
      cpu_relax();
    else
      std::this_thread::yield();
  }
}

}  // namespace

struct ThreadPool::Job {
  const std::function<void(std::int64_t)>* fn;
  std::int64_t n_chunks;
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  std::mutex error_mutex;
  std::exception_ptr error;
};

ThreadPool::ThreadPool(int threads) {
  check_arg(threads >= 1, "ThreadPool", "threads", ">= 1", threads);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    state_.store((generation_of(state_.load()) + 1) << 32 | kClosed);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::work_on(Job& job) {
  for (;;) {
    const std::int64_t chunk = job.next.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= job.n_chunks) return;
    try {
      (*job.fn)(chunk);
    } catch (...) {
      std::lock_guard<std::mutex> lock(job.error_mutex);
      if (!job.error) job.error = std::current_exception();
    }
    job.done.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_loop() {
  std::uint64_t seen = 0;
  for (;;) {
    std::uint64_t s = state_.load(std::memory_order_acquire);
    for (int spin = 0; generation_of(s) == seen && spin < kSpinIterations; ++spin) {
      cpu_relax();
      s = state_.load(std::memory_order_acquire);
    }
    if (generation_of(s) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_of(state_.load(std::memory_order_acquire)) != seen; });
      if (stop_) return;
      s = state_.load(std::memory_order_acquire);
    }
    seen = generation_of(s);
    // Join the job unless the caller has closed it (it finished without us).
    bool joined = false;
    while (!joined && !(s & kClosed) && generation_of(s) == seen)
      joined = state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel);
    if (!joined) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
      continue;
    }
    work_on(*job_.load(std::memory_order_acquire));
    state_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run_chunks(std::int64_t n_chunks, const std::function<void(std::int64_t)>& fn) {
  if (n_chunks <= 0) return;
  Job job;
  job.fn = &fn;
  job.n_chunks = n_chunks;
  if (workers_.empty() || n_chunks == 1) {
    work_on(job);
  } else {
    job_.store(&job, std::memory_order_release);
    {
      // Under the lock, so a worker between its predicate check and its wait cannot miss this.
      std::lock_guard<std::mutex> lock(mutex_);
      state_.store((generation_of(state_.load()) + 1) << 32, std::memory_order_release);
    }
    wake_.notify_all();
    work_on(job);
    wait_until([&] { return job.done.load(std::memory_order_acquire) == n_chunks; });
    // Close the job once no worker is inside it; a worker arriving later finds it closed.
    wait_until([&] {
      std::uint64_t s = state_.load(std::memory_order_acquire);
      return (s & kCountMask) == 0 && state_.compare_exchange_strong(s, s | kClosed, std::memory_order_acq_rel);
    });
    job_.store(nullptr, std::memory_order_relaxed);
  }
  if (job.error) std::rethrow_exception(job.error);
}

void ThreadPool::parallel_for(std::int64_t n, std::int64_t grain,
                              const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t units = (n + grain - 1) / grain;
  const std::int64_t chunks = std::min<std::int64_t>(units, size() == 1 ? 1 : size() * kChunksPerThread);
  run_chunks(chunks, [&](std::int64_t c) {
    const std::int64_t begin = std::min(n, units * c / chunks * grain);
    const std::int64_t end = std::min(n, units * (c + 1) / chunks * grain);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace ignis::engine
