// A fixed-size pool of worker threads for data-parallel loops.
//
// ParallelFor splits [0, n) into one contiguous range per thread and blocks
// until every range is done. The split never changes what any index computes:
// kernels keep a fixed reduction order per output row, so results are
// identical for any thread count (DESIGN.md, Exactness).
//
// Thread-safety: ParallelFor may be called from one thread at a time (the
// engine thread owns its pool).
//
//   ThreadPool pool(4);
//   pool.ParallelFor(rows, [&](int64_t begin, int64_t end) { ... });
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvfleet {

class ThreadPool {
 public:
  // num_threads <= 0 means "one per hardware thread".
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n); the calling
  // thread takes the first range. Ranges are multiples of `grain` (except
  // the last) so callers can keep SIMD-friendly chunks.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

 private:
  void WorkerLoop(int index);

  // A decode step runs a few hundred short loops; waking sleeping threads for
  // each costs more than the loop. Threads spin this many pause
  // instructions (tens of microseconds) before they sleep.
  static constexpr int kSpinIterations = 2000;

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  // Written by the caller before generation_ is bumped; read by workers after
  // they observe the new generation.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  std::vector<std::pair<int64_t, int64_t>> ranges_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace kvfleet
