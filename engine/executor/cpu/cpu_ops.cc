#include "engine/executor/cpu/cpu_ops.h"

#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/lora.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_q8.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rope.h"

namespace kvfleet::engine {

CpuOps::Config CpuOps::Config::For(const model::ModelConfig& c) {
  Config config{.rms_norm_eps = static_cast<float>(c.rms_norm_eps)};
  for (const model::RopeConfig& r : c.ropes) config.ropes.push_back(RopeParamsOf(c, r));
  return config;
}

int64_t CpuOps::Config::RopeScratchFloats(int64_t max_tokens) const {
  int64_t floats = 0;
  for (const kernels::RopeParams& r : ropes) floats += 2 * max_tokens * (r.rot_dim / 2);
  return floats;
}

float* CpuOps::Cos(int32_t r) const {
  float* p = rope_scratch_;
  for (int32_t i = 0; i < r; ++i) p += 2 * step_.num_tokens * (config_.ropes[i].rot_dim / 2);
  return p;
}

float* CpuOps::Sin(int32_t r) const { return Cos(r) + step_.num_tokens * (config_.ropes[r].rot_dim / 2); }

void CpuOps::Prepare() {
  for (int32_t r = 0; r < static_cast<int32_t>(config_.ropes.size()); ++r) {
    kernels::RopeCosSin(config_.ropes[r], step_.arrays.placement.positions, step_.num_tokens, Cos(r), Sin(r));
  }
}

void CpuOps::Embed(const model::WeightView& table, int64_t tokens, float* out) {
  kernels::EmbedRows(table.dtype, table.data, table.cols, {.first_row = table.first_row, .rows = table.rows},
                     step_.arrays.token_ids, tokens, out);
}

void CpuOps::RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t n) {
  kernels::RmsNorm(x, weight, y, rows, n, config_.rms_norm_eps);
}

void CpuOps::RmsNormAcrossRanks(const float* x, const float* weight, float* y, int64_t rows, int64_t n) {
  if (config_.collective == nullptr) {
    kernels::RmsNorm(x, weight, y, rows, n, config_.rms_norm_eps);
    return;
  }
  // Each row's sum of squares, and this rank's width last: one all-reduce
  // gives every rank the whole rows' sums and width. Per thread, grown to
  // the largest step once.
  thread_local std::vector<float> sums;
  sums.resize(static_cast<size_t>(rows + 1));
  kernels::SumSquares(x, rows, n, sums.data());
  sums[static_cast<size_t>(rows)] = static_cast<float>(n);
  config_.collective->AllReduce(sums.data(), rows + 1);
  kernels::ScaleByRms(x, sums.data(), weight, y, rows, n, sums[static_cast<size_t>(rows)], config_.rms_norm_eps);
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

void CpuOps::AddLora(const model::LoraSite& site, const model::WeightView& w, const float* x, int64_t, float* y) {
  if (step_.lora.count == 0) return;
  kernels::AddLora({step_.lora.Site(site), static_cast<size_t>(step_.lora.count)}, x, w.cols, y, w.rows, pool_);
}

void CpuOps::AddBias(float* y, const float* bias, int64_t rows, int64_t n) { kernels::AddBias(y, bias, rows, n); }

void CpuOps::Scale(float* x, int64_t count, float s) { kernels::Scale(x, count, s); }

void CpuOps::Rope(float* x, int64_t tokens, int64_t heads, int32_t rope) {
  kernels::ApplyRope(config_.ropes[rope], Cos(rope), Sin(rope), x, tokens, heads);
}

void CpuOps::WriteKv(int32_t layer, const float* k, const float* v, int64_t tokens) {
  kernels::WriteKv(step_.kv.layout, step_.kv.PlacementFor(step_.arrays, layer), k, v, tokens, step_.kv.K(layer),
                   step_.kv.V(layer), step_.kv.KeyScales(layer));
}

void CpuOps::Attention(const model::AttentionCall& call, const float* q, float* out, int64_t tokens) {
  kernels::PagedAttention({.layout = step_.kv.layout,
                           .where = step_.kv.PlacementFor(step_.arrays, call.layer),
                           .num_tokens = tokens,
                           .num_heads = call.num_heads,
                           .scale = call.scale,
                           .window = call.window,
                           .q = q,
                           .k_cache = step_.kv.K(call.layer),
                           .v_cache = step_.kv.V(call.layer),
                           .out = out,
                           .key_scales = step_.kv.KeyScales(call.layer)},
                          pool_);
}

namespace {

// The gated activations call exp or tanh per element: a batch's worth
// (16 tokens of a 8,960-wide MLP: 143 k calls a layer) took a tenth of a
// decode step on one thread while the others waited. Split across the
// pool past this many elements (below it the hand-off costs more than the
// work); each element's arithmetic is the same whoever computes it.
constexpr int64_t kParallelActivationElements = 4096;

// f(begin, end) over [0, count), on the pool's threads for a large count.
template <class F>
void ForActivationRange(ThreadPool& pool, int64_t count, const F& f) {
  if (count < kParallelActivationElements || pool.num_threads() == 1) {
    f(0, count);
    return;
  }
  const F* fp = &f;  // one pointer: ParallelFor's std::function does not allocate
  pool.ParallelFor(
      count, [fp](int64_t begin, int64_t end) { (*fp)(begin, end); }, /*grain=*/1024);
}

}  // namespace

void CpuOps::SwiGlu(const float* gate, const float* up, float* out, int64_t count) {
  ForActivationRange(pool_, count, [&](int64_t b, int64_t e) { kernels::SwiGlu(gate + b, up + b, out + b, e - b); });
}

void CpuOps::Silu(const float* x, float* out, int64_t count) {
  ForActivationRange(pool_, count, [&](int64_t b, int64_t e) { kernels::Silu(x + b, out + b, e - b); });
}

void CpuOps::GeluTanhMul(const float* gate, const float* up, float* out, int64_t count) {
  ForActivationRange(pool_, count,
                     [&](int64_t b, int64_t e) { kernels::GeluTanhMul(gate + b, up + b, out + b, e - b); });
}

void CpuOps::Add(float* y, const float* x, int64_t count) { kernels::AddInPlace(y, x, count); }

void CpuOps::Logits(const float* x, const float* norm_weight, const model::WeightView& head, float* gathered,
                    float* logits, int64_t rows) {
  kernels::GatherRows(x, step_.arrays.logits_tokens, rows, head.cols, gathered);
  kernels::RmsNorm(gathered, norm_weight, gathered, rows, head.cols, config_.rms_norm_eps);
  MatMul(head, gathered, rows, logits);
}

void CpuOps::AllReduce(float* x, int64_t count) {
  if (config_.collective != nullptr) config_.collective->AllReduce(x, count);
}

void CpuOps::AllGather(float* x, int64_t rows, int64_t width) {
  if (config_.collective != nullptr) config_.collective->AllGather(x, rows, width);
}

}  // namespace kvfleet::engine
