// What every backend's executor shares around the model's forward pass
// (model/arch/forward.h): the batch's arrays where its kernels read them,
// the KV cache of every layer, and the ExecutorInfo a model gives before
// its cache exists.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/kv_sizing.h"
#include "common/status_macros.h"
#include "engine/executor/model_executor.h"
#include "kernels/common/lora_segment.h"
#include "kernels/common/paged_kv.h"
#include "kernels/common/rope_tables.h"
#include "model/arch/activations.h"
#include "model/arch/op_set.h"
#include "model/draft_heads.h"
#include "model/model.h"

namespace kvfleet::engine {

// The batch's arrays in the backend's memory.
struct BatchArrays {
  const int32_t* token_ids = nullptr;
  const int32_t* logits_tokens = nullptr;
  kernels::TokenPlacement placement;  // page group 0's tables and slots
  // Group g's block table and kv_slots are group 0's advanced by g times these.
  int64_t group_table_stride = 0;
  int64_t group_slots_stride = 0;
};

// A step's LoRA segments in the backend's memory (LoraSlots' table):
// `count` per site, sites in layer × kProjections + projection order; count
// 0 when no row of the step runs under an adapter.
struct LoraStep {
  const kernels::LoraSegment* table = nullptr;
  int32_t count = 0;
  int64_t rows = 0;  // what a site's segments cover in all

  const kernels::LoraSegment* Site(const model::LoraSite& s) const {
    return table + (static_cast<int64_t>(s.layer) * model::kProjections + static_cast<int>(s.projection)) * count;
  }
};

// The K and V tensors of the cache, in the backend's memory: one per layer
// slot of a page (every layer, with one page group).
struct KvCacheView {
  kernels::KvCacheLayout layout;
  uint8_t* const* k = nullptr;  // [layers_per_page] → one slot's bytes in `layout`
  uint8_t* const* v = nullptr;
  const model::KvPageGroups* groups = nullptr;  // null: one group, slot = layer
  // int8_rotated_scaled: [layers, num_kv_heads, head_dim] multipliers in
  // the backend's memory (KeyChannelScales); null for the other formats.
  const float* key_scales = nullptr;

  int32_t SlotOf(int32_t layer) const { return groups != nullptr ? groups->layer_slot[layer] : layer; }
  uint8_t* K(int32_t layer) const { return k[SlotOf(layer)]; }
  uint8_t* V(int32_t layer) const { return v[SlotOf(layer)]; }
  const float* KeyScales(int32_t layer) const {
    return key_scales != nullptr ? key_scales + layer * layout.num_kv_heads * layout.head_dim : nullptr;
  }
  // Where a layer's tokens read and write: its page group's table and slots.
  kernels::TokenPlacement PlacementFor(const BatchArrays& a, int32_t layer) const {
    kernels::TokenPlacement p = a.placement;
    const int32_t g = groups != nullptr ? groups->layer_group[layer] : 0;
    if (g > 0) {
      p.block_table += g * a.group_table_stride;
      p.kv_slots += g * a.group_slots_stride;
    }
    return p;
  }
};

// One layer's KV layout for `num_blocks` blocks of the model and options.
inline kernels::KvCacheLayout KvLayoutFor(const model::ModelConfig& c, const ExecutorOptions& options,
                                          int64_t num_blocks) {
  return {.num_blocks = num_blocks,
          .num_kv_heads = c.num_kv_heads,
          .block_size = options.block_size,
          .head_dim = c.head_dim,
          .dtype = options.kv_cache_dtype};
}

// Bytes a token's K and V take over every layer, its share of each block's
// padding included (rounded up, so a plan in tokens never overcommits).
inline int64_t KvBytesPerCachedToken(const model::ModelConfig& c, const ExecutorOptions& options) {
  const kernels::KvCacheLayout one = KvLayoutFor(c, options, 1);
  return (2 * c.num_layers * one.BytesPerLayer() + options.block_size - 1) / options.block_size;
}

// "+kv-int8" for an 8-bit KV cache, appended to a backend's numerics
// identity: its tokens differ from a float16 cache's.
inline std::string KvNumericsSuffix(kernels::KvCacheDtype dtype) {
  return dtype == kernels::KvCacheDtype::kF16 ? std::string() : "+kv-" + std::string(kernels::KvCacheDtypeName(dtype));
}

// Appended after KvNumericsSuffix by an executor with scaled keys: the
// scales' digest ("+kv-int8_rotated_scaled-1a2b3c4d"), so KV written under
// other scales is foreign to it; empty for the other formats.
inline std::string KeyScalesDigestSuffix(const ExecutorOptions& options) {
  return kernels::KvScalesKeyChannels(options.kv_cache_dtype) ? "-" + options.key_channel_scales->Digest()
                                                              : std::string();
}

// The key channel scales as multipliers for the kernels, checked against
// the model's shape; empty for a format without them.
inline absl::StatusOr<std::vector<float>> KeyScaleMultipliers(const model::ModelConfig& c,
                                                              const ExecutorOptions& options) {
  if (!kernels::KvScalesKeyChannels(options.kv_cache_dtype)) return std::vector<float>();
  RETURN_IF_ERROR(options.key_channel_scales->CheckShape(c.num_layers, c.num_kv_heads, c.head_dim));
  return options.key_channel_scales->Multipliers();
}

// How a backend rotates by one of the model's RoPE configurations: its
// angles' parameters, the frequency factors chosen once for the context the
// executor serves (RopeConfig::FactorsFor; `r` outlives the result).
inline kernels::RopeParams RopeParamsOf(const model::ModelConfig& c, const model::RopeConfig& r) {
  const std::vector<float>& factors = r.FactorsFor(c.context_length);
  return {
      .mode = r.pairing == model::RopePairing::kAdjacent ? kernels::RopeMode::kAdjacent : kernels::RopeMode::kHalves,
      .head_dim = c.head_dim,
      .rot_dim = r.dim,
      .theta_base = static_cast<float>(r.theta),
      .position_scale = static_cast<float>(r.position_scale),
      .freq_factors = factors.empty() ? nullptr : factors.data(),
      .magnitude = r.magnitude};
}

// RunDraftHeads' arguments against the loaded heads (null: none loaded).
inline absl::Status CheckDraftHeadsCall(const model::DraftHeads* heads, std::span<const float> hidden, int64_t rows,
                                        int32_t num_heads) {
  if (heads == nullptr) return absl::FailedPreconditionError("RunDraftHeads before LoadDraftHeads");
  if (num_heads < 1 || num_heads > heads->num_heads()) {
    return absl::InvalidArgumentError(absl::StrCat("draft heads: ", num_heads, " heads asked of ", heads->num_heads()));
  }
  if (rows < 1 || static_cast<int64_t>(hidden.size()) != rows * heads->hidden_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft heads: ", hidden.size(), " hidden values for ", rows, " rows of ", heads->hidden_size()));
  }
  return absl::OkStatus();
}

// The model's shape, the options' geometry and limits (logits rows
// resolved), the cache's bytes per token. The backend adds its numerics.
inline ExecutorInfo ExecutorInfoFor(const model::Model& model, const ExecutorOptions& options) {
  const model::ModelConfig& c = model.config();
  ExecutorInfo info{.device = options.device,
                    .vocab_size = c.vocab_size,
                    .context_length = c.context_length,
                    .block_size = options.block_size,
                    .num_layers = c.num_layers,
                    .weight_bytes = model.weight_bytes(),
                    .kv_bytes_per_token = KvBytesPerCachedToken(c, options),
                    .kv_groups = model::KvPageGroupsFor(c, options.free_window_blocks),
                    .lora_slots = options.lora.max_loras,
                    .max_lora_rank = options.lora.max_rank,
                    .limits = options.limits};
  info.kv_block_bytes = 2 * info.kv_groups.layers_per_page * KvLayoutFor(c, options, 1).BytesPerLayer();
  info.limits.max_logits_rows = options.limits.logits_rows();
  return info;
}

// Checks a CopyKvBlockOut/In request against the cache: the block in range,
// the buffer exactly one block.
inline absl::Status CheckKvBlockCopy(const ExecutorInfo& info, BlockId block, size_t bytes) {
  if (info.num_blocks == 0) return absl::FailedPreconditionError("KV block copy before AllocateKvCache");
  if (block.value() < 0 || block.value() >= info.num_blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV block ", block.value(), " out of range [0, ", info.num_blocks, ")"));
  }
  if (static_cast<int64_t>(bytes) != info.kv_block_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a KV block is ", info.kv_block_bytes, " bytes, the buffer ", bytes));
  }
  return absl::OkStatus();
}

// Checks MoveKvSlots' slots: as many sources as destinations, each inside
// the pool's pages.
inline absl::Status CheckKvMoves(const ExecutorInfo& info, std::span<const int64_t> from, std::span<const int64_t> to) {
  if (info.num_blocks == 0) return absl::FailedPreconditionError("KV move before AllocateKvCache");
  if (from.size() != to.size()) {
    return absl::InvalidArgumentError(absl::StrCat("KV move of ", from.size(), " slots to ", to.size()));
  }
  const int64_t slots = info.num_blocks * info.block_size;
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] < 0 || from[i] >= slots || to[i] < 0 || to[i] >= slots) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV move from slot ", from[i], " to ", to[i], " outside the cache's ", slots, " slots"));
    }
  }
  return absl::OkStatus();
}

// The step a batch asks of the model: its tokens, how many layers, its logits rows.
inline model::ForwardStep StepOf(const ForwardBatch& batch, const model::ModelConfig& c) {
  return {.num_tokens = batch.num_tokens(),
          .num_layers = batch.num_layers > 0 ? batch.num_layers : c.num_layers,
          .num_logits_rows = batch.num_logits_rows()};
}

// The arrays of a host-side batch, as the CPU reads them.
inline BatchArrays HostArrays(const ForwardBatch& batch) {
  return {.token_ids = batch.token_ids.data(),
          .logits_tokens = batch.logits_tokens.data(),
          .placement = {.positions = batch.positions.data(),
                        .token_chunk = batch.token_chunk.data(),
                        .block_table = batch.block_table.data(),
                        .table_width = batch.max_blocks_per_chunk,
                        .kv_slots = batch.kv_slots.data(),
                        .tree_masks = batch.tree_masks.empty() ? nullptr : batch.tree_masks.data()},
          .group_table_stride = batch.group_table_size(),
          .group_slots_stride = batch.num_tokens()};
}

}  // namespace kvfleet::engine
