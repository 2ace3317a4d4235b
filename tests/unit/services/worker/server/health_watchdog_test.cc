#include "services/worker/server/health_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <vector>

#include "tests/testing/collecting_sink.h"

namespace kvfleet::worker {

void PrintTo(const HealthVerdict& v, std::ostream* os) { *os << "{ready=" << v.ready << " live=" << v.live << "}"; }

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr HealthVerdict kDown{.ready = false, .live = false};
constexpr HealthVerdict kServing{.ready = true, .live = true};
constexpr HealthVerdict kDraining{.ready = false, .live = true};

struct Reported {
  std::vector<HealthVerdict> changes;
  HealthWatchdog::OnChange fn() {
    return [this](HealthVerdict v) { changes.push_back(v); };
  }
};

TEST(HealthWatchdogTest, ReadyOnlyWhenLoadedAndNotDrainingButLiveWhileDraining) {
  Reported r;
  HealthWatchdog dog(nullptr, {}, r.fn());
  EXPECT_EQ(dog.Check(Clock::now()), kDown) << "not loaded: neither ready nor live";
  dog.SetLoaded(true);
  dog.SetDraining(true);
  dog.SetDraining(false);
  EXPECT_EQ(r.changes, (std::vector<HealthVerdict>{kDown, kServing, kDraining, kServing}));
}

TEST(HealthWatchdogTest, StallNeedsWorkInFlightAndNoProgress) {
  const Clock::time_point t0 = Clock::now();
  engine::EngineHeartbeat beat{.in_flight = 0, .last_progress = t0};
  Reported r;
  HealthWatchdog dog([&] { return beat; }, {.stall_timeout = milliseconds(100)}, r.fn());
  dog.SetLoaded(true);
  EXPECT_EQ(dog.Check(t0 + milliseconds(500)), kServing) << "idle for long is not a stall";
  EXPECT_EQ(dog.Progress(t0 + milliseconds(500)).seconds_since_progress, 0.0) << "idle reads 0";
  beat.in_flight = 3;
  EXPECT_EQ(dog.Check(t0 + milliseconds(50)), kServing);
  EXPECT_EQ(dog.Check(t0 + milliseconds(150)), kDown) << "a stall turns liveness off too";
  EXPECT_TRUE(dog.stalled());
  const EngineProgress stuck = dog.Progress(t0 + milliseconds(150));
  EXPECT_DOUBLE_EQ(stuck.seconds_since_progress, 0.15);
  EXPECT_TRUE(stuck.stalled);
  beat.last_progress = t0 + milliseconds(140);
  EXPECT_EQ(dog.Check(t0 + milliseconds(150)), kServing);
  EXPECT_FALSE(dog.Progress(t0 + milliseconds(150)).stalled);
  EXPECT_EQ(r.changes, (std::vector<HealthVerdict>{kServing, kDown, kServing}));
}

// An executor whose forward pass blocks until released: a stalled engine loop.
class BlockingExecutor : public engine::ModelExecutor {
 public:
  BlockingExecutor() : logits_(8 * 64, 0.0f) {
    info_ = {.vocab_size = 8, .context_length = 64, .block_size = 4, .num_blocks = 32};
  }
  const engine::ExecutorInfo& info() const override { return info_; }
  engine::ExecutorMemory memory() const override { return {}; }
  absl::StatusOr<engine::DeviceFreeMemory> FreeMemory() const override { return engine::DeviceFreeMemory{}; }
  absl::Status AllocateKvCache(int64_t) override { return absl::OkStatus(); }
  absl::StatusOr<engine::ForwardOutput> Forward(const engine::ForwardBatch& batch) override {
    std::unique_lock<std::mutex> lock(mu_);
    entered_ = true;
    entered_cv_.notify_all();
    release_cv_.wait(lock, [this] { return released_; });
    return engine::ForwardOutput{.vocab_size = 8, .num_rows = batch.num_logits_rows(), .logits = logits_.data()};
  }
  void WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    entered_cv_.wait(lock, [this] { return entered_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    release_cv_.notify_all();
  }

 private:
  engine::ExecutorInfo info_;
  std::vector<float> logits_;
  std::mutex mu_;
  std::condition_variable entered_cv_, release_cv_;
  bool entered_ = false, released_ = false;
};

TEST(HealthWatchdogTest, ABlockedEngineLoopTurnsHealthNotServing) {
  BlockingExecutor executor;
  engine::Engine engine(executor, {.model_id = "fake"});
  engine.Start();
  Reported r;
  HealthWatchdog dog([&] { return engine.Heartbeat(); }, {.stall_timeout = milliseconds(200)}, r.fn());
  dog.SetLoaded(true);
  kvfleet::testing::CollectingSink sink;
  ASSERT_TRUE(engine.Submit({.id = RequestId(1), .prompt = {1, 2}, .sampling = {.temperature = 0.0f},
                             .stopping = {.max_tokens = 1}},
                            &sink)
                  .ok());
  executor.WaitEntered();
  const Clock::time_point stuck_since = engine.Heartbeat().last_progress;
  EXPECT_EQ(dog.Check(stuck_since + milliseconds(1000)), kDown);
  executor.Release();
  sink.WaitFinished();
  engine.Stop();
  EXPECT_EQ(dog.Check(Clock::now()), kServing) << "no request in flight any more";
  EXPECT_EQ(r.changes, (std::vector<HealthVerdict>{kServing, kDown, kServing}));
}

}  // namespace
}  // namespace kvfleet::worker
