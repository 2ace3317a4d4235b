#include "common/thread_pool.h"

#include <immintrin.h>

#include <algorithm>

#include "common/host_cpus.h"

namespace kvfleet {
namespace {

template <typename Pred>
bool SpinUntil(Pred pred, int iterations) {
  for (int i = 0; i < iterations; ++i) {
    if (pred()) return true;
    _mm_pause();
  }
  return pred();
}

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0 ? num_threads : UsableCpus()) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunks() {
  while (true) {
    int64_t first = next_grain_.load();
    int64_t take;
    do {
      if (first >= num_grains_) return;
      take = std::max<int64_t>(1, (num_grains_ - first) / (2 * num_threads_));
    } while (!next_grain_.compare_exchange_weak(first, first + take));
    (*job_)(first * grain_, std::min(job_n_, (first + take) * grain_));
    done_grains_.fetch_add(take);
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t grains = (n + grain - 1) / grain;
  if (num_threads_ == 1 || grains == 1) {
    fn(0, n);
    return;
  }
  {
    // Workers join a job under the mutex, so they never see it half set up,
    // and one about to sleep cannot miss the bump.
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    grain_ = grain;
    num_grains_ = grains;
    done_grains_.store(0);
    next_grain_.store(0);
    generation_.fetch_add(1);
  }
  work_cv_.notify_all();
  RunChunks();
  // Every chunk is claimed; wait for those still running and for every worker
  // that joined, before `fn` goes out of scope. No worker can join now: there
  // is nothing left to claim.
  while (done_grains_.load() < num_grains_ || active_.load() > 0) _mm_pause();
}

void ThreadPool::RunOnEachThread(const std::function<void()>& fn) {
  // One grain per thread, so one-grain chunks (fewer than 2·threads are
  // left from the start), and no thread leaves its chunk before every chunk
  // has started: so no thread can take two, and every thread takes one.
  std::atomic<int> started{0};
  ParallelFor(num_threads_, [&](int64_t, int64_t) {
    started.fetch_add(1);
    fn();
    while (started.load() < num_threads_) _mm_pause();
  });
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    auto has_work = [&] { return stop_.load() || generation_.load() != seen; };
    if (!SpinUntil(has_work, kSpinIterations)) {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, has_work);
    }
    if (stop_.load()) return;
    bool joined = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen = generation_.load();
      if (next_grain_.load() < num_grains_) {
        active_.fetch_add(1);
        joined = true;
      }
    }
    if (joined) {
      RunChunks();
      active_.fetch_sub(1);
    }
  }
}

}  // namespace kvfleet
