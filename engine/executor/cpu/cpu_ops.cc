#include "engine/executor/cpu/cpu_ops.h"

#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_q8.h"
#include "kernels/cpu/paged_attention.h"

namespace kvfleet::engine {

CpuOps::Config CpuOps::Config::For(const model::LlamaHparams& hp, const float* freq_factors) {
  return {.rope = {.mode = hp.rope_pairing == model::RopePairing::kAdjacent ? kernels::RopeMode::kAdjacent
                                                                             : kernels::RopeMode::kHalves,
                   .head_dim = hp.head_dim,
                   .rot_dim = hp.rope_dim,
                   .theta_base = static_cast<float>(hp.rope_theta),
                   .position_scale = static_cast<float>(1.0 / hp.rope_scaling_factor),
                   .freq_factors = freq_factors},
          .rms_norm_eps = static_cast<float>(hp.rms_norm_eps),
          .attention_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim))};
}

void CpuOps::Prepare(const ForwardBatch& batch, const BatchArrays& arrays) {
  kernels::RopeCosSin(config_.rope, arrays.placement.positions, batch.num_tokens(), rope_cos_, rope_sin_);
}

void CpuOps::Embed(const model::WeightView& table, const int32_t* token_ids, int64_t tokens, float* out) {
  kernels::EmbedRows(table.dtype, table.data, table.cols, token_ids, tokens, out);
}

void CpuOps::RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t n) {
  kernels::RmsNorm(x, weight, y, rows, n, config_.rms_norm_eps);
}

void CpuOps::MatMul(const model::WeightView& w, const float* x, int64_t m, float* y) {
  if (config_.q8_weights != nullptr) {
    if (const kernels::Q8PanelWeights* panels = config_.q8_weights->Find(w.data)) {
      kernels::MatMulQ8(*panels, x, m, y, pool_, config_.q8_scratch);
      return;
    }
  }
  kernels::MatMul({.w_type = w.dtype, .w = w.data, .n = w.rows, .k = w.cols, .x = x, .m = m, .y = y}, pool_);
}

void CpuOps::AddBias(float* y, const float* bias, int64_t rows, int64_t n) { kernels::AddBias(y, bias, rows, n); }

void CpuOps::Rope(float* x, int64_t tokens, int64_t heads) {
  kernels::ApplyRope(config_.rope, rope_cos_, rope_sin_, x, tokens, heads);
}

void CpuOps::WriteKv(const kernels::KvCacheLayout& layout, const kernels::TokenPlacement& where, const float* k,
                     const float* v, int64_t tokens, uint16_t* k_cache, uint16_t* v_cache) {
  kernels::WriteKv(layout, where, k, v, tokens, k_cache, v_cache);
}

void CpuOps::Attention(const ForwardBatch& batch, const kernels::KvCacheLayout& layout,
                       const kernels::TokenPlacement& where, int64_t heads, const float* q, const uint16_t* k_cache,
                       const uint16_t* v_cache, float* out) {
  kernels::PagedAttention({.layout = layout,
                           .where = where,
                           .num_tokens = batch.num_tokens(),
                           .num_heads = heads,
                           .scale = config_.attention_scale,
                           .q = q,
                           .k_cache = k_cache,
                           .v_cache = v_cache,
                           .out = out},
                          pool_);
}

void CpuOps::SwiGlu(const float* gate, const float* up, float* out, int64_t count) {
  kernels::SwiGlu(gate, up, out, count);
}

void CpuOps::Add(float* y, const float* x, int64_t count) { kernels::AddInPlace(y, x, count); }

void CpuOps::Logits(const float* x, const int32_t* rows, int64_t num_rows, const float* norm_weight,
                    const model::WeightView& head, float* gathered, float* logits) {
  kernels::GatherRows(x, rows, num_rows, head.cols, gathered);
  kernels::RmsNorm(gathered, norm_weight, gathered, num_rows, head.cols, config_.rms_norm_eps);
  MatMul(head, gathered, num_rows, logits);
}

}  // namespace kvfleet::engine
