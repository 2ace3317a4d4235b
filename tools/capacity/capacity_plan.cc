#include "tools/capacity/capacity_plan.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/kv_sizing.h"
#include "common/status_macros.h"
#include "model/arch/architecture_registry.h"

namespace kvfleet::tools {

namespace {

// A token's K and V over one page's layers (the worker's pool unit), for
// `kv_heads` of the model's KV heads (a rank's share).
int64_t PageTokenBytes(const model::ModelConfig& config, int64_t kv_heads, const model::KvPageGroups& groups,
                       int64_t bytes_per_value, int64_t row_scale_bytes) {
  return KvBytesPerToken({.num_layers = groups.layers_per_page, .num_kv_heads = kv_heads, .head_dim = config.head_dim},
                         bytes_per_value, row_scale_bytes);
}

// The matrices' parameters a rank holds (or the whole model's, for the
// share of every dimension): attention by its query and KV heads, the
// feed-forward by its columns, the embedding and head by its vocabulary.
// Norms and biases are left out: they are replicated and small.
double MatrixParameters(const model::ModelConfig& c, const model::RankShare& s) {
  const double hidden = static_cast<double>(c.hidden_size), d = static_cast<double>(c.head_dim);
  const double per_layer = hidden * d * (2.0 * static_cast<double>(s.q_heads) + 2.0 * static_cast<double>(s.kv_heads)) +
                           3.0 * hidden * static_cast<double>(s.ffn_columns);
  return static_cast<double>(c.num_layers) * per_layer +
         static_cast<double>(s.vocab_rows) * hidden * (c.tied_embeddings ? 1.0 : 2.0);
}

}  // namespace

int64_t WindowAwareKvBytes(const model::ModelConfig& config, int64_t context, int64_t block_size,
                           int64_t bytes_per_value, int64_t row_scale_bytes) {
  const model::KvPageGroups groups = model::KvPageGroupsFor(config, true);
  return groups.PagesForSequence(context, block_size) * block_size *
         PageTokenBytes(config, config.num_kv_heads, groups, bytes_per_value, row_scale_bytes);
}

int64_t EstimateParameters(const model::ModelConfig& c) {
  const model::Architecture* arch = model::FindArchitectureByName(c.architecture);
  const auto elements = [&](const model::TensorSpec& t) { return DimSize(t.rows, c) * DimSize(t.cols, c); };
  int64_t per_layer = 0;
  for (const model::TensorSpec& t : arch != nullptr ? arch->layer_tensors : model::Architectures()[0].layer_tensors) {
    per_layer += elements(t);
  }
  int64_t whole = elements(model::names::kTokenEmbd) + elements(model::names::kOutputNorm);
  if (!c.tied_embeddings) whole += elements(model::names::kOutput);
  return whole + c.num_layers * per_layer;
}

absl::StatusOr<CapacityPlan> PlanCapacity(const CapacityInput& in) {
  if (in.config == nullptr) return absl::InvalidArgumentError("no model config to plan for");
  const model::ModelConfig& c = *in.config;
  if (in.block_size <= 0) return absl::InvalidArgumentError("the block size must be positive");
  if (in.devices < 1) return absl::InvalidArgumentError("--devices must be at least 1");
  if (in.context < 0 || in.concurrency < 0) {
    return absl::InvalidArgumentError("--context and --concurrency must not be negative");
  }
  if (in.context > c.context_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("--context ", in.context, " is longer than the model's ", c.context_length, " tokens"));
  }
  ASSIGN_OR_RETURN(const model::ShardPlan shards, model::PlanShards(c, in.tensor_parallel, in.alignment));
  if (in.devices % in.tensor_parallel != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--devices ", in.devices, " is not a whole number of replicas of ",
                                                   in.tensor_parallel, " devices each (--tensor-parallel)"));
  }
  CapacityPlan plan;
  plan.shards = shards.Describe();
  plan.replicas = in.devices / in.tensor_parallel;
  plan.kv_heads_per_rank = shards.max_kv_heads_per_rank();
  plan.weight_bytes_per_rank = in.weight_bytes;
  if (in.tensor_parallel > 1) {
    const model::RankShare whole{
        .q_heads = c.num_heads, .kv_heads = c.num_kv_heads, .ffn_columns = c.ffn_size, .vocab_rows = c.vocab_size};
    double largest = 0;
    for (const model::RankShare& s : shards.ranks) largest = std::max(largest, MatrixParameters(c, s));
    plan.weight_bytes_per_rank =
        static_cast<int64_t>(std::ceil(static_cast<double>(in.weight_bytes) * largest / MatrixParameters(c, whole)));
  }
  plan.kv_bytes_per_token = KvBytesPerToken(c.kv_shape(), in.kv_bytes_per_value, in.kv_row_scale_bytes);
  plan.kv_bytes_per_token_per_rank =
      KvBytesPerToken({.num_layers = c.num_layers, .num_kv_heads = plan.kv_heads_per_rank, .head_dim = c.head_dim},
                      in.kv_bytes_per_value, in.kv_row_scale_bytes);
  plan.context = in.context > 0 ? in.context : c.context_length;
  plan.blocks_per_conversation = BlocksForTokens(plan.context, in.block_size);
  plan.page_groups = model::KvPageGroupsFor(c, true);
  const int64_t page_token_bytes =
      PageTokenBytes(c, plan.kv_heads_per_rank, plan.page_groups, in.kv_bytes_per_value, in.kv_row_scale_bytes);
  const auto pages_for = [&](int64_t tokens) { return plan.page_groups.PagesForSequence(tokens, in.block_size); };
  plan.pages_per_conversation = pages_for(plan.context);
  plan.kv_bytes_per_conversation = plan.pages_per_conversation * in.block_size * page_token_bytes;
  plan.every_block_kv_bytes_per_conversation = plan.blocks_per_conversation * in.block_size * plan.kv_bytes_per_token;
  plan.kv_bytes_for_concurrency = in.concurrency * plan.kv_bytes_per_conversation;
  plan.has_windows = plan.page_groups.frees_window_blocks();

  if (in.kv_budget_bytes.has_value()) {
    plan.kv_budget_bytes = *in.kv_budget_bytes;
  } else {
    if (in.device_memory_bytes <= 0) {
      return absl::InvalidArgumentError(
          "give the device's memory (--device-memory 80GiB) or the KV budget itself "
          "(--kv-cache-memory 8GiB)");
    }
    if (!(in.memory_utilization > 0.0 && in.memory_utilization <= 1.0)) {
      return absl::InvalidArgumentError("--memory-utilization must be in (0, 1]");
    }
    const auto usable = static_cast<int64_t>(in.memory_utilization * static_cast<double>(in.device_memory_bytes));
    plan.kv_budget_bytes = std::max<int64_t>(0, usable - plan.weight_bytes_per_rank - in.overhead_bytes);
    plan.weights_fit = usable > plan.weight_bytes_per_rank + in.overhead_bytes;
  }
  const KvCachePlan pages = PlanKvCache(page_token_bytes, in.block_size, plan.kv_budget_bytes, plan.context);
  plan.num_blocks = pages.num_blocks;
  plan.tokens = pages.tokens;
  plan.conversations_that_fit =
      plan.pages_per_conversation > 0 ? plan.num_blocks / plan.pages_per_conversation * plan.replicas : 0;
  if (in.host_tier_bytes < 0 || in.disk_tier_bytes < 0) {
    return absl::InvalidArgumentError("KV tier sizes cannot be negative");
  }
  // A tier keeps whole blocks: a disk file adds a header of about 100 bytes.
  // The tiers are the worker's, one per replica, holding every rank's share.
  const int64_t block_bytes = in.block_size * plan.kv_bytes_per_token;
  if (block_bytes > 0 && plan.blocks_per_conversation > 0) {
    plan.host_tier_conversations = in.host_tier_bytes / block_bytes / plan.blocks_per_conversation * plan.replicas;
    plan.disk_tier_conversations =
        in.disk_tier_bytes / (block_bytes + 128) / plan.blocks_per_conversation * plan.replicas;
  }
  if (in.concurrency > 0) {
    const int64_t per_device = (in.concurrency + plan.replicas - 1) / plan.replicas;
    plan.concurrency_fits = per_device * plan.pages_per_conversation <= plan.num_blocks;
    // The longest context per_device conversations reach at once: pages
    // grow by a block per group at first, by group 0's alone past a window.
    // A conversation of k blocks holds at least k pages, so k ≤ pages_each.
    const int64_t pages_each = plan.num_blocks / per_device;
    int64_t lo = 0, hi = pages_each;  // blocks
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (pages_for(mid * in.block_size) <= pages_each) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const int64_t by_memory = lo * in.block_size;
    plan.longest_context = std::min(by_memory, c.context_length);
    plan.longest_context_capped = by_memory > c.context_length;
  }
  return plan;
}

}  // namespace kvfleet::tools
