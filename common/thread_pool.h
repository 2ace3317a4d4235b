// A fixed-size pool of worker threads for data-parallel loops.
//
// ParallelFor cuts [0, n) into chunks (multiples of `grain`) that the
// calling thread and the workers claim from a shared counter until none are
// left. Claiming, rather than a fixed split, keeps a loop from stalling when
// the OS deschedules a worker on a busy machine: the others take its share.
// Chunks shrink as the loop runs (each claims a 2·threads-th of what is
// left): big ones first, cheap to claim, and small ones last, so that no
// thread waits long for another's last chunk at the end of a loop.
// Which thread computes an index never changes what it computes: kernels keep
// a fixed reduction order per output row (docs/design.md, Exactness).
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
  // num_threads <= 0 means one per CPU this process may use (UsableCpus:
  // the affinity mask and the cgroup CPU limit, not the node's cores).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n) and returns
  // when all are done. Range starts are multiples of `grain`.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // Runs fn exactly once on every thread of the pool (the caller's
  // included) and returns when all are done: to size per-thread scratch
  // before the first real loop, so that none allocates later.
  void RunOnEachThread(const std::function<void()>& fn);

 private:
  // Claims and runs chunks of the current job until none are left.
  void RunChunks();
  void WorkerLoop();

  // Workers spin briefly before sleeping: a decode step runs a few hundred
  // short loops and a futex wake-up for each costs more than the loop.
  static constexpr int kSpinIterations = 2000;

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;

  // The current job: written under mu_, read by workers that joined it.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t grain_ = 1;
  int64_t num_grains_ = 0;
  std::atomic<int64_t> next_grain_{0};
  std::atomic<int64_t> done_grains_{0};
  // Workers that joined the current job (under mu_); the caller waits for
  // zero before `fn` may go away.
  std::atomic<int> active_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace kvfleet
