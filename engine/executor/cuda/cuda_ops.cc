#include "engine/executor/cuda/cuda_ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_runtime.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/lora.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/paged_attention.h"
#include "kernels/cuda/rope.h"

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

namespace kc = kernels::cuda;

int64_t CudaAttentionWorkspace::PartialsFor(const model::ModelConfig& c, int64_t max_tokens, int64_t budget_bytes) {
  const int64_t per_partial = c.num_heads * (c.head_dim + 2) * static_cast<int64_t>(sizeof(float));
  const int64_t one_tile = kc::MinWorkspacePartials(c.num_heads / c.num_kv_heads, c.context_length);
  const int64_t whole_batch = max_tokens * kc::PartitionsFor(static_cast<int32_t>(c.context_length - 1));
  return std::max(one_tile, std::min(whole_batch, budget_bytes / per_partial));
}

int64_t CudaAttentionWorkspace::ItemsFor(int64_t max_tokens, int64_t context_length) {
  return max_tokens * kc::PartitionsFor(static_cast<int32_t>(context_length - 1));
}

CudaOps::Config CudaOps::Config::For(const model::ModelConfig& c) {
  Config config{.rms_norm_eps = static_cast<float>(c.rms_norm_eps), .group = c.num_heads / c.num_kv_heads};
  for (const model::RopeConfig& r : c.ropes) {
    config.ropes.push_back(
        {.mode = r.pairing == model::RopePairing::kAdjacent ? kernels::RopeMode::kAdjacent : kernels::RopeMode::kHalves,
         .head_dim = c.head_dim,
         .rot_dim = r.dim});
  }
  return config;
}

void CudaOps::Prepare() {
  const ForwardBatch& batch = *step_.batch;
  kc::AttentionPlan& plan = workspace_.plan;
  if (!kc::PlanAttention(batch.positions.data(), batch.chunk_starts.data(), batch.num_chunks(), config_.group,
                         workspace_.partial_capacity, &plan,
                         batch.tree_masks.empty() ? nullptr : batch.tree_masks.data())) {
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

void CudaOps::Embed(const model::WeightView& table, int64_t tokens, float* out) {
  kc::LaunchEmbedRows(table.dtype, table.data, table.cols, {.first_row = table.first_row, .rows = table.rows},
                      step_.arrays.token_ids, tokens, out, stream_);
}

void CudaOps::RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t n) {
  kc::LaunchRmsNorm(x, weight, y, rows, n, config_.rms_norm_eps, stream_);
}

void CudaOps::RmsNormAcrossRanks(const float* x, const float* weight, float* y, int64_t rows, int64_t n) {
  if (config_.collective == nullptr) {
    RmsNorm(x, weight, y, rows, n);
    return;
  }
  if (status_.ok()) status_ = absl::UnimplementedError("a norm across tensor-parallel ranks is not built on CUDA");
}

void CudaOps::MatMul(const model::WeightView& w, const float* x, int64_t m, float* y) {
  kc::LaunchMatMul({.w_type = w.dtype, .w = w.data, .n = w.rows, .k = w.cols, .x = x, .m = m, .y = y}, stream_);
}

void CudaOps::AddLora(const model::LoraSite& site, const model::WeightView& w, const float* x, int64_t, float* y) {
  if (step_.lora.count == 0) return;
  kc::LaunchAddLora(step_.lora.Site(site), step_.lora.count, step_.lora.rows, x, w.cols, y, w.rows, stream_);
}

void CudaOps::AddBias(float* y, const float* bias, int64_t rows, int64_t n) {
  kc::LaunchAddBias(y, bias, rows, n, stream_);
}

void CudaOps::Scale(float* x, int64_t count, float s) { kc::LaunchScale(x, count, s, stream_); }

void CudaOps::Rope(float* x, int64_t tokens, int64_t heads, int32_t rope) {
  kc::LaunchRope(config_.ropes[rope], config_.rope_cos[rope], config_.rope_sin[rope], step_.arrays.placement.positions,
                 x, tokens, heads, stream_);
}

void CudaOps::WriteKv(int32_t layer, const float* k, const float* v, int64_t tokens) {
  kc::LaunchWriteKv(step_.kv.layout, step_.kv.PlacementFor(step_.arrays, layer), k, v, tokens, step_.kv.K(layer),
                    step_.kv.V(layer), step_.kv.KeyScales(layer), stream_);
}

void CudaOps::Attention(const model::AttentionCall& call, const float* q, float* out, int64_t tokens) {
  kc::LaunchPagedAttention({.layout = step_.kv.layout,
                            .where = step_.kv.PlacementFor(step_.arrays, call.layer),
                            .num_heads = call.num_heads,
                            .scale = call.scale,
                            .window = call.window,
                            .q = q,
                            .k_cache = step_.kv.K(call.layer),
                            .v_cache = step_.kv.V(call.layer),
                            .out = out,
                            .items = workspace_.items,
                            .partial_offsets = workspace_.partial_offsets,
                            .partial_o = workspace_.partial_o,
                            .partial_ml = workspace_.partial_ml,
                            .key_scales = step_.kv.KeyScales(call.layer)},
                           workspace_.plan, stream_);
}

void CudaOps::SwiGlu(const float* gate, const float* up, float* out, int64_t count) {
  kc::LaunchSwiGlu(gate, up, out, count, stream_);
}

void CudaOps::Silu(const float* x, float* out, int64_t count) { kc::LaunchSilu(x, out, count, stream_); }

void CudaOps::GeluTanhMul(const float* gate, const float* up, float* out, int64_t count) {
  kc::LaunchGeluTanhMul(gate, up, out, count, stream_);
}

void CudaOps::Add(float* y, const float* x, int64_t count) { kc::LaunchAddInPlace(y, x, count, stream_); }

void CudaOps::Logits(const float* x, const float* norm_weight, const model::WeightView& head, float* gathered,
                     float* logits, int64_t rows) {
  kc::LaunchGatherRows(x, step_.arrays.logits_tokens, rows, head.cols, gathered, stream_);
  kc::LaunchRmsNorm(gathered, norm_weight, gathered, rows, head.cols, config_.rms_norm_eps, stream_);
  MatMul(head, gathered, rows, logits);
}

// A rank whose stream failed still meets the others (they would wait for
// it forever); its status fails the step, and the executor the replica's.
void CudaOps::SynchronizeForCollective() {
  absl::Status synced = ::kvfleet::cuda::Synchronize(stream_);
  if (status_.ok()) status_ = synced;
}

void CudaOps::AllReduce(float* x, int64_t count) {
  if (config_.collective == nullptr) return;
  SynchronizeForCollective();
  config_.collective->AllReduce(x, count);
}

void CudaOps::AllGather(float* x, int64_t rows, int64_t width) {
  if (config_.collective == nullptr) return;
  SynchronizeForCollective();
  config_.collective->AllGather(x, rows, width);
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
