#include "services/worker/server/health_watchdog.h"

#include "common/logging.h"

namespace kvfleet::worker {

HealthWatchdog::HealthWatchdog(HeartbeatFn heartbeat, HealthWatchdogOptions options, OnChange on_change)
    : heartbeat_(std::move(heartbeat)), options_(options), on_change_(std::move(on_change)) {}

HealthWatchdog::~HealthWatchdog() { Stop(); }

void HealthWatchdog::SetLoaded(bool loaded) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    loaded_ = loaded;
  }
  Publish();
}

void HealthWatchdog::SetDraining(bool draining) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = draining;
  }
  Publish();
}

HealthVerdict HealthWatchdog::Check(Clock::time_point now) {
  const engine::EngineHeartbeat beat = heartbeat_ ? heartbeat_() : engine::EngineHeartbeat{};
  const bool stalled = beat.in_flight > 0 && now - beat.last_progress > options_.stall_timeout;
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    changed = stalled != stalled_;
    stalled_ = stalled;
  }
  if (changed && stalled) {
    KVFLEET_LOG_ERROR("engine loop stalled: {} requests in flight and no step for over {} ms; readiness and "
                      "liveness NOT_SERVING",
                      beat.in_flight, options_.stall_timeout.count());
  } else if (changed) {
    KVFLEET_LOG_INFO("engine loop progressing again");
  }
  Publish();
  std::lock_guard<std::mutex> lock(mu_);
  return *reported_;
}

bool HealthWatchdog::stalled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stalled_;
}

EngineProgress HealthWatchdog::Progress(Clock::time_point now) const {
  const engine::EngineHeartbeat beat = heartbeat_ ? heartbeat_() : engine::EngineHeartbeat{};
  EngineProgress progress;
  if (beat.in_flight > 0 && now > beat.last_progress) {
    progress.seconds_since_progress = std::chrono::duration<double>(now - beat.last_progress).count();
  }
  progress.stalled = stalled();
  return progress;
}

void HealthWatchdog::Publish() {
  // Serialized so two racing changes reach the callback in the order decided.
  std::lock_guard<std::mutex> publishing(publish_mu_);
  HealthVerdict verdict;
  {
    std::lock_guard<std::mutex> lock(mu_);
    verdict = {.ready = loaded_ && !draining_ && !stalled_, .live = loaded_ && !stalled_};
    if (reported_ == verdict) return;
    reported_ = verdict;
  }
  if (on_change_) on_change_(verdict);
}

void HealthWatchdog::Start() {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      Check(Clock::now());
      lock.lock();
      wake_.wait_for(lock, options_.period, [this] { return stop_; });
    }
  });
}

void HealthWatchdog::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace kvfleet::worker
