#include "engine/executor/rank_threads.h"

namespace kvfleet::engine {

RankThreads::RankThreads(int32_t ranks) {
  for (int32_t r = 1; r < ranks; ++r) threads_.emplace_back([this, r] { Loop(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RankThreads::Run(absl::FunctionRef<void(int32_t)> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    running_ = static_cast<int32_t>(threads_.size());
    ++generation_;
  }
  changed_.notify_all();
  fn(0);
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
}

void RankThreads::Loop(int32_t rank) {
  uint64_t seen = 0;
  while (true) {
    const absl::FunctionRef<void(int32_t)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(rank);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    changed_.notify_all();
  }
}

}  // namespace kvfleet::engine
