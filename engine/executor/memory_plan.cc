#include "engine/executor/memory_plan.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/byte_size.h"
#include "common/check.h"
#include "common/kv_sizing.h"
#include "common/status_macros.h"

namespace kvfleet::engine {
namespace {

bool IsFraction(const std::string& spec, double* fraction) {
  return spec.find('.') != std::string::npos && absl::SimpleAtod(spec, fraction);
}

std::string MiB(int64_t bytes) { return absl::StrCat(bytes / (1 << 20), " MiB"); }

}  // namespace

std::vector<std::pair<std::string, int64_t>> MemoryPlan::Components() const {
  return {{"weights", weight_bytes},
          {"scratch", scratch_bytes},
          {"lora_adapters", lora_bytes},
          {"draft_weights", draft_weight_bytes},
          {"draft_scratch", draft_scratch_bytes},
          {"draft_kv_cache", draft_kv_cache_bytes},
          {"host_kv_tier", host_kv_tier_bytes},
          {"kv_cache", kv_cache_bytes}};
}

std::string MemoryPlan::ToString() const {
  std::vector<std::string> rows;
  for (const auto& [name, bytes] : Components()) {
    if (bytes > 0) rows.push_back(absl::StrCat(name, " ", MiB(bytes)));
  }
  return absl::StrCat("memory plan on ", device, ": ", absl::StrJoin(rows, ", "), "; KV budget ", MiB(kv_budget_bytes),
                      " of ", MiB(free_bytes), " free = ", num_blocks, " blocks of ", block_size, " tokens at ",
                      kv_bytes_per_token, " bytes per token, ", full_context_sequences, " full-context sequences",
                      layers_per_page > 0 && layers_per_page < num_layers
                          ? absl::StrCat("; each block a page of ", layers_per_page, " of the ", num_layers,
                                         " layers (sliding-window layers free the blocks their window has passed)")
                          : "");
}

absl::StatusOr<MemoryPlan> PlanMemoryFrom(const MemoryPlanInput& input, const DeviceFreeMemory& free) {
  CHECK(input.target != nullptr);
  const ExecutorInfo& info = input.target->info();
  const ExecutorMemory target = input.target->memory();
  const ExecutorMemory draft = input.draft != nullptr ? input.draft->memory() : ExecutorMemory{};
  MemoryPlan plan{.device = info.device.ToString(),
                  .weight_bytes = target.weight_bytes,
                  .scratch_bytes = target.scratch_bytes,
                  .lora_bytes = target.lora_bytes,
                  .draft_weight_bytes = draft.weight_bytes,
                  .draft_scratch_bytes = draft.scratch_bytes,
                  .block_size = info.block_size,
                  .kv_bytes_per_token = info.kv_bytes_per_token,
                  .layers_per_page = info.kv_groups.layers_per_page,
                  .num_layers = info.num_layers};
  // What is not resident yet: resident bytes are already out of a free
  // figure that does not exclude own allocations.
  const int64_t own = target.weight_bytes + target.scratch_bytes + target.lora_bytes + draft.weight_bytes +
                      draft.scratch_bytes - target.resident_bytes - draft.resident_bytes;
  plan.free_bytes = std::max<int64_t>(0, free.excludes_own_allocations ? free.free_bytes : free.free_bytes - own);
  if (info.device.kind == DeviceKind::kCpu && input.host_kv_tier_bytes > 0) {
    // Its pages are only touched as blocks land there, so no free figure
    // shows it yet: the KV cache must leave it room.
    plan.host_kv_tier_bytes = input.host_kv_tier_bytes;
    plan.free_bytes = std::max<int64_t>(0, plan.free_bytes - input.host_kv_tier_bytes);
  }

  double fraction = 0.0;
  if (IsFraction(input.kv_cache_memory, &fraction)) {
    if (!(fraction > 0.0 && fraction <= 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat("--kv-cache-memory ", input.kv_cache_memory,
                                                     ": a fraction must be in (0, 1]; or give a size like 2GiB"));
    }
    plan.kv_budget_bytes = static_cast<int64_t>(fraction * static_cast<double>(plan.free_bytes));
  } else {
    ASSIGN_OR_RETURN(plan.kv_budget_bytes, ParseByteSize(input.kv_cache_memory));
    if (plan.kv_budget_bytes > plan.free_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "--kv-cache-memory ", input.kv_cache_memory, " is more than the ", MiB(plan.free_bytes), " free on ",
          plan.device, " once the weights (", MiB(plan.weight_bytes + plan.draft_weight_bytes), ") and scratch (",
          MiB(plan.scratch_bytes + plan.draft_scratch_bytes),
          ") are in place; give a smaller size or a fraction such as 0.9"));
    }
  }
  const int64_t draft_per_token = input.draft != nullptr ? input.draft->info().kv_bytes_per_token : 0;
  // The pool counts pages: with window pages freed (one page group per
  // window kind), a page holds fewer layers than a block of every layer.
  const int64_t target_per_token =
      info.kv_block_bytes > 0 ? (info.kv_block_bytes + info.block_size - 1) / info.block_size : info.kv_bytes_per_token;
  const KvCachePlan blocks =
      PlanKvCache(target_per_token + draft_per_token, info.block_size, plan.kv_budget_bytes, info.context_length);
  plan.num_blocks = blocks.num_blocks;
  const int64_t pages_per_sequence = info.kv_groups.PagesForSequence(info.context_length, info.block_size);
  plan.full_context_sequences =
      pages_per_sequence > 0 ? blocks.num_blocks / pages_per_sequence : blocks.full_context_sequences;
  if (plan.num_blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a KV budget of ", plan.kv_budget_bytes, " bytes (--kv-cache-memory ", input.kv_cache_memory,
                     ") holds no block of ", info.block_size, " tokens at ", target_per_token + draft_per_token,
                     " bytes per token; give it more memory"));
  }
  plan.kv_cache_bytes = plan.num_blocks * info.block_size * target_per_token;
  plan.draft_kv_cache_bytes = plan.num_blocks * info.block_size * draft_per_token;
  return plan;
}

absl::StatusOr<MemoryPlan> PlanMemory(const MemoryPlanInput& input) {
  CHECK(input.target != nullptr);
  ASSIGN_OR_RETURN(DeviceFreeMemory free, input.target->FreeMemory());
  return PlanMemoryFrom(input, free);
}

}  // namespace kvfleet::engine
