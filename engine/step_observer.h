// A hook the engine calls after every step that ran the model, so a service
// can time steps (Prometheus histograms) without the engine knowing about
// metrics. Called on the engine thread: it must be quick and never block.
//
//   struct Timer : StepObserver { void OnStep(const StepReport& r) override { hist.Observe(r.seconds); } };
//   EngineOptions{.step_observer = &timer};
#pragma once

#include <cstdint>

namespace kvfleet::engine {

struct StepReport {
  double seconds = 0.0;             // schedule + forward + sampling + streaming
  int32_t num_tokens = 0;           // computed this step (prefill chunks, decode and drafted tokens)
  int32_t num_sequences = 0;        // requests in the batch
  int32_t num_prefill_tokens = 0;   // of num_tokens, prompt (and recompute) tokens
  int32_t num_draft_tokens = 0;     // of num_tokens, drafted tokens verified
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void OnStep(const StepReport& report) = 0;
  // A prefix pull from a peer ended (engine/kv/transfer): its time from
  // asking to the blocks' arrival, whatever its outcome.
  virtual void OnPeerPull(double /*seconds*/) {}
};

}  // namespace kvfleet::engine
