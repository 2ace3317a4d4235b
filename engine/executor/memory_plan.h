// One memory plan for every backend: the weights and scratch the target and
// draft executors already hold, then KV blocks from the budget — as many for
// the draft's cache as for the target's, since every request the target
// holds can be drafted for.
//
// The budget (--kv-cache-memory) keeps one meaning on every device: the KV
// cache's bytes, target and draft together. A size is taken as given (and
// refused if the device does not have it free); a fraction f in (0, 1] means
// f × what is free once weights and scratch are in place. Free is
// min(MemAvailable, cgroup limit − usage) on the CPU, from which the
// executors' own weights and scratch are still to be taken (they are mapped
// or allocated but not yet resident), and cudaMemGetInfo's free bytes on a
// GPU, measured after they were allocated.
//
//   ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory({.kv_cache_memory = "0.9", .target = target.get()}));
//   RETURN_IF_ERROR(target->AllocateKvCache(plan.num_blocks));
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/executor/model_executor.h"

namespace kvfleet::engine {

struct MemoryPlanInput {
  std::string kv_cache_memory = "1GiB";   // a size ("2GiB") or a fraction of what is free ("0.9")
  const ModelExecutor* target = nullptr;  // created, no KV cache yet
  const ModelExecutor* draft = nullptr;   // the draft model's executor, or null
  // A host-memory KV tier (--kv-host-memory). On a CPU worker it shares the
  // memory the KV cache is planned from, so it comes off what is free first.
  int64_t host_kv_tier_bytes = 0;
};

struct MemoryPlan {
  std::string device;
  int64_t free_bytes = 0;  // the device's free memory once weights and scratch are in place
  int64_t weight_bytes = 0;
  int64_t scratch_bytes = 0;
  int64_t lora_bytes = 0;  // room for the resident LoRA adapters (--max-loras at --max-lora-rank)
  int64_t draft_weight_bytes = 0;
  int64_t draft_scratch_bytes = 0;
  int64_t host_kv_tier_bytes = 0;  // a CPU worker's host tier, set aside before the KV budget
  int64_t kv_budget_bytes = 0;     // what --kv-cache-memory resolved to
  int64_t kv_cache_bytes = 0;      // the target's cache: num_blocks × block_size × bytes per token
  int64_t draft_kv_cache_bytes = 0;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t kv_bytes_per_token = 0;
  int64_t full_context_sequences = 0;  // sequences of the model's whole context that fit at once
  // A block of the pool is a page of this many layers: fewer than the model
  // has when sliding-window layers free their passed blocks (0: unknown).
  int64_t layers_per_page = 0;
  int64_t num_layers = 0;

  // (component, bytes) rows for logs and the memory metric: weights,
  // scratch, lora_adapters, draft_weights, draft_scratch, draft_kv_cache, host_kv_tier, kv_cache.
  std::vector<std::pair<std::string, int64_t>> Components() const;
  std::string ToString() const;
};

// INVALID_ARGUMENT for a malformed budget or one that holds no block;
// RESOURCE_EXHAUSTED for a size larger than the device has free, naming both.
absl::StatusOr<MemoryPlan> PlanMemory(const MemoryPlanInput& input);

// The plan's arithmetic alone, for PlanMemory and tests: `free` as the
// device reported it.
absl::StatusOr<MemoryPlan> PlanMemoryFrom(const MemoryPlanInput& input, const DeviceFreeMemory& free);

}  // namespace kvfleet::engine
