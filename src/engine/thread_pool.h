#pragma once
// A fixed set of threads for the engine's CPU loops. A decode step makes a few hundred parallel
// calls of a few microseconds each, so starting threads per call (tens of microseconds) would
// cost more than the work: the workers stay alive, spin briefly between calls, then sleep.
//
// Work is split into more chunks than threads and claimed from a shared counter, and a worker
// joins a call only if it arrives before the call ends: when the machine is oversubscribed and a
// worker is not scheduled, the caller does the work itself instead of waiting for it.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
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

  // Runs fn(chunk) once for every chunk in [0, n_chunks), spread over the threads, and returns
  // when all are done. The first exception thrown by any fn is rethrown here. Not reentrant.
  void run_chunks(std::int64_t n_chunks, const std::function<void(std::int64_t)>& fn);

  // Splits [0, n) into ranges of whole multiples of `grain` (the last may be shorter), a few per
  // thread, and runs fn(begin, end) on each.
  void parallel_for(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t, std::int64_t)>& fn);

 private:
  struct Job;
  void worker_loop();
  static void work_on(Job& job);

  std::vector<std::thread> workers_;
  // generation << 32 | closed << 31 | workers inside the current job.
  std::atomic<std::uint64_t> state_{0};
  std::atomic<Job*> job_{nullptr};
  bool stop_ = false;  // guarded by mutex_
  std::mutex mutex_;
  std::condition_variable wake_;
};

}  // namespace ignis::engine
