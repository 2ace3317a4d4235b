#include "engine/sampler/mask_prefetcher.h"

#include <chrono>

namespace kvfleet::engine {

MaskPrefetcher::MaskPrefetcher() = default;

MaskPrefetcher::~MaskPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MaskPrefetcher::Start(std::vector<std::shared_ptr<TokenConstraint>> constraints) {
  if (constraints.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_ = std::move(constraints);
    busy_ = true;
  }
  // An engine serving no constrained request never starts the thread.
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  cv_.notify_all();
}

double MaskPrefetcher::Wait() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (!busy_) return 0.0;
  cv_.wait(lock, [this] { return !busy_; });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void MaskPrefetcher::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || busy_; });
    if (stop_) return;
    std::vector<std::shared_ptr<TokenConstraint>> work = std::move(work_);
    lock.unlock();
    for (const std::shared_ptr<TokenConstraint>& c : work) c->PrepareMask();
    work.clear();  // the last reference to a finished request's constraint goes here, not under the lock
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace kvfleet::engine
