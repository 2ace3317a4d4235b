// The worker's Prometheus metrics (docs/metrics.md lists each one).
//
// Two sources: per-request events that the gRPC layer records as they
// happen (counters and latency histograms, in a prometheus::Registry), and
// the engine's own gauges and counters, read from Engine::Stats() at scrape
// time by EngineStatsCollector so they are exact and cost nothing between
// scrapes. Step timings arrive through the engine's StepObserver hook.
//
// Labels are of low cardinality only: a finish reason or a status code,
// never a request id.
//
// Thread-safety: every method is thread-safe (prometheus-cpp metrics are).
//
//   WorkerMetrics metrics;
//   exposer.RegisterCollectable(metrics.registry());
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_stats.h"
#include "engine/request/finish_reason.h"
#include "engine/request/request.h"
#include "engine/step_observer.h"
#include "services/worker/grammar/grammar_compiler.h"
#include "services/worker/server/health_watchdog.h"

namespace kvfleet::worker {

class WorkerMetrics : public engine::StepObserver {
 public:
  WorkerMetrics();

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // A request the worker refused before it reached the engine; `code` is a
  // gRPC status code name in lower case ("invalid_argument", ...).
  void RecordRejected(const std::string& code);
  void RecordFirstToken(double seconds_since_arrival);
  void RecordInterToken(double seconds);
  void RecordFinished(engine::FinishReason reason, const engine::Usage& usage, double e2e_seconds,
                      double queue_seconds);

  void OnStep(const engine::StepReport& report) override;
  void OnPeerPull(double seconds) override;
  // One constrained token's mask, filled (GrammarCompiler's MaskObserver).
  void RecordGrammarMask(double seconds);

  // Once, when the model has loaded: the memory plan's components (bytes
  // each) and the device with its numerics identity.
  void SetMemoryPlan(const std::vector<std::pair<std::string, int64_t>>& components);
  // mode_source: "calibration", "flags" or "exact" (worker_mode.h).
  void SetDevice(const std::string& device, const std::string& numerics, const std::string& mode_source);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* rejected_;
  std::array<prometheus::Counter*, 5> finished_{};  // by engine::FinishReason
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* cached_prompt_tokens_;
  prometheus::Counter* generated_tokens_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* inter_token_;
  prometheus::Histogram* e2e_;
  prometheus::Histogram* queue_;
  prometheus::Histogram* step_seconds_;
  prometheus::Histogram* step_tokens_;
  prometheus::Histogram* grammar_mask_;
  prometheus::Histogram* peer_pull_;
  prometheus::Family<prometheus::Gauge>* memory_bytes_;
  prometheus::Family<prometheus::Gauge>* device_info_;
};

// The engine's gauges and counters, read at scrape time.
class EngineStatsCollector : public prometheus::Collectable {
 public:
  explicit EngineStatsCollector(std::function<engine::EngineStats()> stats) : stats_(std::move(stats)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<engine::EngineStats()> stats_;
};

// The KV tiers below the device cache, read at scrape time: per tier
// (host, disk) blocks and bytes held, capacity, hits, loads and their time,
// bytes moved each way, evictions, and the disk's errors and state.
class KvTierStatsCollector : public prometheus::Collectable {
 public:
  explicit KvTierStatsCollector(std::function<engine::KvTierStats()> stats) : stats_(std::move(stats)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<engine::KvTierStats()> stats_;
};

// The health watchdog's view, read at scrape time: how long the engine has
// gone without progress while it has work, and whether that is a stall.
class EngineProgressCollector : public prometheus::Collectable {
 public:
  explicit EngineProgressCollector(std::function<EngineProgress()> progress) : progress_(std::move(progress)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<EngineProgress()> progress_;
};

// Structured output's costs, read at scrape time: grammar compilations and
// cache hits, time compiling, and time filling token masks.
class GrammarStatsCollector : public prometheus::Collectable {
 public:
  explicit GrammarStatsCollector(const GrammarCompiler& compiler) : compiler_(compiler) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const GrammarCompiler& compiler_;
};

}  // namespace kvfleet::worker
