// The capacity planner's arithmetic (kvfleet capacity): from a model's
// config and weight bytes, a device budget and a workload, the KV cache a
// token and a conversation cost, the blocks that fit, and the conversations
// (or the longest context) they serve.
//
// Counted as the worker allocates: one model replica per device, or per
// tensor_parallel devices, each rank holding its shard of the weights and
// its KV heads' share of every block (model/arch/shard_plan.h); pages
// through the same PlanKvCache
// the worker's memory plan uses, so a budget given in bytes yields the
// worker's page count. A page is a block of every layer, except for
// sliding-window models, whose windowed layers keep only the blocks their
// window still reaches (model/arch/kv_page_groups.h): their conversations
// are counted that way, beside what keeping every block would cost.
//
//   ASSIGN_OR_RETURN(CapacityPlan plan, PlanCapacity({.config = &config, .weight_bytes = w,
//                                                     .device_memory_bytes = 80LL << 30, .context = 8000}));
//   plan.conversations_that_fit  // at 8,000 tokens each
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "model/arch/kv_page_groups.h"
#include "model/arch/model_config.h"
#include "model/arch/shard_plan.h"

namespace kvfleet::tools {

struct CapacityInput {
  const model::ModelConfig* config = nullptr;
  int64_t weight_bytes = 0;        // the replica's weights (files, or an estimate)
  int64_t kv_bytes_per_value = 2;  // 2: f16/bf16 (kvfleet's cache); 1: fp8/int8; 4: f32
  int64_t kv_row_scale_bytes = 0;  // per token, KV head and K or V: 2 for kvfleet's int8 (a binary16 scale)
  int64_t block_size = 16;         // tokens per KV block (the worker's --block-size)

  // The KV budget of one device: kv_budget_bytes when given (the worker's
  // --kv-cache-memory as a size); otherwise memory_utilization × device
  // memory, less the weights and the overhead (CUDA context, cuBLAS
  // workspace, activations: the worker measures its own at start).
  std::optional<int64_t> kv_budget_bytes;
  int64_t device_memory_bytes = 0;
  int64_t devices = 1;  // devices in all: devices / tensor_parallel replicas
  // Ranks per replica, and where its row-parallel splits must fall.
  int32_t tensor_parallel = 1;
  model::ShardAlignment alignment;
  double memory_utilization = 0.9;
  int64_t overhead_bytes = int64_t{1} << 30;

  // The workload: a context per conversation (0: the model's), and a
  // concurrency (0: none given; then the conversations that fit are counted).
  int64_t context = 0;
  int64_t concurrency = 0;

  // KV tiers below the device, per replica's worker (0: none):
  // --kv-host-memory and --kv-disk-size. They keep conversations to reuse,
  // not to run.
  int64_t host_tier_bytes = 0;
  int64_t disk_tier_bytes = 0;
};

struct CapacityPlan {
  int64_t kv_bytes_per_token = 0;         // 2 × layers × kv_heads × head_dim × bytes per value
  int64_t context = 0;                    // the context planned for
  int64_t blocks_per_conversation = 0;    // ⌈context / block_size⌉
  int64_t kv_bytes_per_conversation = 0;  // what it holds: its pages' bytes (every block of every layer, or
                                          // of full-attention layers and the window's of windowed ones)
  int64_t kv_bytes_for_concurrency = 0;   // × concurrency (0 when none given)
  model::KvPageGroups page_groups;        // how the worker pages the layers
  int64_t pages_per_conversation = 0;     // blocks_per_conversation × groups, less the window's freed pages

  // Tensor parallelism: the split (ShardPlan::Describe, "tp1" without),
  // replicas, and the largest rank's weights and KV heads (all of them at
  // tensor_parallel 1). A rank's KV per token is the model's over its share
  // of the KV heads; replicated KV heads count on every rank holding them.
  std::string shards = "tp1";
  int64_t replicas = 1;
  int64_t weight_bytes_per_rank = 0;
  int64_t kv_heads_per_rank = 0;
  int64_t kv_bytes_per_token_per_rank = 0;

  // Per device (each a replica, or a replica's rank, with its own weights and cache).
  int64_t kv_budget_bytes = 0;  // 0 when the weights and overhead leave nothing
  bool weights_fit = true;
  int64_t num_blocks = 0;  // pages of page_groups.layers_per_page layers
  int64_t tokens = 0;      // num_blocks × block_size: tokens of every layer when each page is a whole block

  // Over all devices, conversations spread evenly.
  int64_t conversations_that_fit = 0;   // of `context` tokens each
  int64_t longest_context = 0;          // with `concurrency` conversations at once (0 without one)
  bool longest_context_capped = false;  // the model's context length, not memory, is the limit
  bool concurrency_fits = false;        // `concurrency` conversations of `context` tokens fit

  // Sliding-window models: every block of every layer kept, for comparison
  // (equal to kv_bytes_per_conversation otherwise).
  bool has_windows = false;
  int64_t every_block_kv_bytes_per_conversation = 0;
  // Over all devices: conversations of `context` tokens each lower tier
  // keeps for reuse (loaded back on a hit instead of recomputed).
  int64_t host_tier_conversations = 0;
  int64_t disk_tier_conversations = 0;
};

// INVALID_ARGUMENT for a missing config, a budget that is neither given nor
// derivable, a workload beyond what the model accepts, or a
// tensor-parallel degree that cannot split the model or the devices.
absl::StatusOr<CapacityPlan> PlanCapacity(const CapacityInput& input);

// The KV bytes one conversation of `context` tokens holds when each windowed
// layer keeps only the blocks its window can reach: ⌈(window − 1) / block⌉ + 1
// blocks (a window straddles a block boundary), or fewer for short contexts.
int64_t WindowAwareKvBytes(const model::ModelConfig& config, int64_t context, int64_t block_size,
                           int64_t bytes_per_value, int64_t row_scale_bytes = 0);

// Parameters implied by a config: every tensor its architecture's specs
// declare (model/arch/tensor_spec.h) at its sizes, an untied output head
// included; the weight estimate for a bare config.json. A config of no
// registered architecture is counted as the first's (Llama).
int64_t EstimateParameters(const model::ModelConfig& config);

}  // namespace kvfleet::tools
