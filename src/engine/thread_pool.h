#pragma once
// A fixed set of threads for the engine's CPU loops. A decode step makes a few hundred parallel
// calls of a few microseconds each, so starting threads per call (tens of microseconds) would
// cost more than the work: the workers stay alive, spin briefly between calls, then sleep.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ignis::engine {

class ThreadPool {
 public:
  // `threads` >= 1 counts the calling thread: ThreadPool(2) starts one worker.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(t) once for every t in [0, size()), t = 0 on the calling thread, and returns when
  // all are done. The first exception thrown by any fn is rethrown here. Not reentrant.
  void run(const std::function<void(int)>& fn);

  // Splits [0, n) into size() contiguous ranges (multiples of `grain` except the last) and runs
  // fn(begin, end) on each non-empty one.
  void parallel_for(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t, std::int64_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::exception_ptr error_;
  std::mutex error_mutex_;
};

}  // namespace ignis::engine
