// Decides the worker's health from three facts: the model has loaded, the
// worker is not draining, and the engine loop is not stalled (requests in
// flight but no step finished for `stall_timeout`). Two verdicts:
//   ready = loaded && !draining && !stalled   (send it traffic)
//   live  = loaded && !stalled                (a drain is not a reason to restart)
// Reports every change through a callback (which flips grpc.health.v1).
//
// Check(now) is the whole policy and is what tests call with chosen times;
// Start() runs it on a thread every `period`.
//
// Thread-safety: all methods are thread-safe. The callback runs on the
// calling or watchdog thread, one call at a time, in order.
//
//   HealthWatchdog dog([&] { return engine.Heartbeat(); }, {.stall_timeout = 60s}, set_health);
//   dog.SetLoaded(true); dog.Start();
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "engine/engine.h"

namespace kvfleet::worker {

struct HealthVerdict {
  bool ready = false;
  bool live = false;
  bool operator==(const HealthVerdict&) const = default;
};

// What the watchdog saw at its last check, for the metrics.
struct EngineProgress {
  double seconds_since_progress = 0;  // 0 when nothing is in flight
  bool stalled = false;
};

struct HealthWatchdogOptions {
  std::chrono::milliseconds stall_timeout{60000};
  std::chrono::milliseconds period{500};
};

class HealthWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  using HeartbeatFn = std::function<engine::EngineHeartbeat()>;
  using OnChange = std::function<void(HealthVerdict)>;

  HealthWatchdog(HeartbeatFn heartbeat, HealthWatchdogOptions options, OnChange on_change);
  ~HealthWatchdog();

  void SetLoaded(bool loaded);
  void SetDraining(bool draining);
  // Evaluates health at `now` and reports a change.
  HealthVerdict Check(Clock::time_point now);
  bool stalled() const;
  // Asks the engine afresh, so a scrape sees a stall building up before the
  // watchdog's next check.
  EngineProgress Progress(Clock::time_point now) const;

  void Start();
  void Stop();

 private:
  void Publish();

  HeartbeatFn heartbeat_;
  HealthWatchdogOptions options_;
  OnChange on_change_;

  std::mutex publish_mu_;  // held across deciding and reporting, never inside mu_
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stalled_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<HealthVerdict> reported_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kvfleet::worker
