#include "common/thread_pool.h"

#include <immintrin.h>

#include <algorithm>

namespace kvfleet {
namespace {

// Spins until pred() holds or the budget runs out; returns pred().
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
    : num_threads_(num_threads > 0 ? num_threads
                                   : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t chunks = (n + grain - 1) / grain;
  const int parts = static_cast<int>(std::min<int64_t>(num_threads_, chunks));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  ranges_.assign(num_threads_, {0, 0});
  for (int p = 0; p < parts; ++p) {
    ranges_[p] = {std::min(n, chunks * p / parts * grain), std::min(n, chunks * (p + 1) / parts * grain)};
  }
  job_ = &fn;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  {
    // Under the mutex so a worker about to sleep cannot miss the bump.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  fn(ranges_[0].first, ranges_[0].second);
  auto all_done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!SpinUntil(all_done, kSpinIterations)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, all_done);
  }
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    auto has_work = [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; };
    if (!SpinUntil(has_work, kSpinIterations)) {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, has_work);
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    const auto [begin, end] = ranges_[index];
    if (begin < end) (*job_)(begin, end);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

}  // namespace kvfleet
