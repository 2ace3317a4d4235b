// Which LoRA adapters sit in the executor's slots (ModelExecutor::LoadLora),
// as the scheduler's run gate: a request under an adapter is admitted only
// once its adapter is resident, and pins that slot while it runs. An adapter
// not resident is loaded into a free slot, or into the least recently used
// slot no running request pins; when every slot is pinned, the request waits
// and the others go ahead.
//
// Adapters are matched by identity (name and weights' digest), so a request
// for an adapter re-registered with new weights never runs on the old ones.
//
// Thread-safety: the engine thread only, except resident() (any thread).
//
//   LoraResidency lora(executor, info.lora_slots);
//   Scheduler scheduler(config, kv, &lora);
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/executor/model_executor.h"
#include "engine/lora/lora_stats.h"
#include "engine/scheduler/scheduler.h"
#include "model/lora/lora_adapter.h"

namespace kvfleet::engine {

class LoraResidency : public RunGate {
 public:
  LoraResidency(ModelExecutor& executor, int32_t slots);

  Verdict Acquire(Request& req) override;
  void Release(Request& req) override;

  // Empties the slots holding adapters of this name that no running request
  // pins (an unloaded adapter's memory goes back at once; one still in use
  // goes when its last request stops). Engine thread.
  void Evict(const std::string& name);

  // Thread-safe: a copy of the identities resident now, in slot order, and the counters.
  std::vector<std::string> resident() const;
  LoraResidencyStats stats() const;

 private:
  struct Slot {
    std::shared_ptr<const model::LoraAdapter> adapter;
    std::string identity;
    int32_t pins = 0;
    uint64_t last_used = 0;
    bool evict_when_unpinned = false;
  };
  void Empty(int32_t slot);
  void Publish();

  ModelExecutor& executor_;
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
  mutable std::mutex mu_;  // guards the published copies
  std::vector<std::string> published_;
  LoraResidencyStats stats_;
};

}  // namespace kvfleet::engine
