#include "engine/executor/cuda/cuda_ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_runtime.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/paged_attention.h"
#include "kernels/cuda/rope.h"

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

namespace kc = kernels::cuda;

int64_t CudaAttentionWorkspace::PartialsFor(const model::LlamaHparams& hp, int64_t max_tokens, int64_t budget_bytes) {
  const int64_t per_partial = hp.num_heads * (hp.head_dim + 2) * static_cast<int64_t>(sizeof(float));
  const int64_t one_tile = kc::MinWorkspacePartials(hp.num_heads / hp.num_kv_heads, hp.context_length);
  const int64_t whole_batch = max_tokens * kc::PartitionsFor(static_cast<int32_t>(hp.context_length - 1));
  return std::max(one_tile, std::min(whole_batch, budget_bytes / per_partial));
}

int64_t CudaAttentionWorkspace::ItemsFor(int64_t max_tokens, int64_t context_length) {
  return max_tokens * kc::PartitionsFor(static_cast<int32_t>(context_length - 1));
}

int64_t CudaAttentionWorkspace::BytesFor(const model::LlamaHparams& hp, int64_t max_tokens, int64_t items,
                                         int64_t partials) {
  return items * static_cast<int64_t>(sizeof(kc::AttentionWorkItem)) + max_tokens * 8 +
         partials * hp.num_heads * (hp.head_dim + 2) * static_cast<int64_t>(sizeof(float));
}

CudaOps::Config CudaOps::Config::For(const model::LlamaHparams& hp, const float* rope_cos, const float* rope_sin) {
  return {.rope = {.mode = hp.rope_pairing == model::RopePairing::kAdjacent ? kernels::RopeMode::kAdjacent
                                                                             : kernels::RopeMode::kHalves,
                   .head_dim = hp.head_dim,
                   .rot_dim = hp.rope_dim},
          .rope_cos = rope_cos,
          .rope_sin = rope_sin,
          .rms_norm_eps = static_cast<float>(hp.rms_norm_eps),
          .attention_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim)),
          .group = hp.num_heads / hp.num_kv_heads};
}

void CudaOps::Prepare(const ForwardBatch& batch, const BatchArrays& arrays) {
  positions_ = arrays.placement.positions;
  kc::AttentionPlan& plan = workspace_.plan;
  if (!kc::PlanAttention(batch.positions.data(), batch.chunk_starts.data(), batch.num_chunks(), config_.group,
                         workspace_.partial_capacity, &plan)) {
    status_ = absl::InternalError(absl::StrCat("an attention tile needs more than the workspace's ",
                                               workspace_.partial_capacity, " partial results"));
    return;
  }
  if (static_cast<int64_t>(plan.items.size()) > workspace_.item_capacity) {
    status_ = absl::InternalError(absl::StrCat("the attention plan has ", plan.items.size(),
                                               " work items; the workspace holds ", workspace_.item_capacity));
    plan.groups.clear();  // launch nothing
    return;
  }
  absl::Status copied = ::kvfleet::cuda::CopyToDevice(workspace_.items, plan.items.data(),
                                                      plan.items.size() * sizeof(kc::AttentionWorkItem), stream_);
  if (copied.ok()) {
    copied = ::kvfleet::cuda::CopyToDevice(workspace_.partial_offsets, plan.partial_offsets.data(),
                                           plan.partial_offsets.size() * sizeof(int64_t), stream_);
  }
  if (!copied.ok()) {
    status_ = copied;
    plan.groups.clear();
  }
}

void CudaOps::Embed(const model::WeightView& table, const int32_t* token_ids, int64_t tokens, float* out) {
  kc::LaunchEmbedRows(table.dtype, table.data, table.cols, token_ids, tokens, out, stream_);
}

void CudaOps::RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t n) {
  kc::LaunchRmsNorm(x, weight, y, rows, n, config_.rms_norm_eps, stream_);
}

void CudaOps::MatMul(const model::WeightView& w, const float* x, int64_t m, float* y) {
  kc::LaunchMatMul({.w_type = w.dtype, .w = w.data, .n = w.rows, .k = w.cols, .x = x, .m = m, .y = y}, stream_);
}

void CudaOps::AddBias(float* y, const float* bias, int64_t rows, int64_t n) {
  kc::LaunchAddBias(y, bias, rows, n, stream_);
}

void CudaOps::Rope(float* x, int64_t tokens, int64_t heads) {
  kc::LaunchRope(config_.rope, config_.rope_cos, config_.rope_sin, positions_, x, tokens, heads, stream_);
}

void CudaOps::WriteKv(const kernels::KvCacheLayout& layout, const kernels::TokenPlacement& where, const float* k,
                      const float* v, int64_t tokens, uint16_t* k_cache, uint16_t* v_cache) {
  kc::LaunchWriteKv(layout, where, k, v, tokens, k_cache, v_cache, stream_);
}

void CudaOps::Attention(const ForwardBatch& batch, const kernels::KvCacheLayout& layout,
                        const kernels::TokenPlacement& where, int64_t heads, const float* q, const uint16_t* k_cache,
                        const uint16_t* v_cache, float* out) {
  kc::LaunchPagedAttention({.layout = layout,
                            .where = where,
                            .num_heads = heads,
                            .scale = config_.attention_scale,
                            .q = q,
                            .k_cache = k_cache,
                            .v_cache = v_cache,
                            .out = out,
                            .items = workspace_.items,
                            .partial_offsets = workspace_.partial_offsets,
                            .partial_o = workspace_.partial_o,
                            .partial_ml = workspace_.partial_ml},
                           workspace_.plan, stream_);
}

void CudaOps::SwiGlu(const float* gate, const float* up, float* out, int64_t count) {
  kc::LaunchSwiGlu(gate, up, out, count, stream_);
}

void CudaOps::Add(float* y, const float* x, int64_t count) { kc::LaunchAddInPlace(y, x, count, stream_); }

void CudaOps::Logits(const float* x, const int32_t* rows, int64_t num_rows, const float* norm_weight,
                     const model::WeightView& head, float* gathered, float* logits) {
  kc::LaunchGatherRows(x, rows, num_rows, head.cols, gathered, stream_);
  kc::LaunchRmsNorm(gathered, norm_weight, gathered, num_rows, head.cols, config_.rms_norm_eps, stream_);
  MatMul(head, gathered, num_rows, logits);
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
