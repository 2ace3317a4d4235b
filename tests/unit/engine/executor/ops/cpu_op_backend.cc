#include "tests/unit/engine/executor/ops/cpu_op_backend.h"

#include "common/thread_pool.h"
#include "engine/executor/cpu/cpu_ops.h"

namespace kvfleet::engine::ops_test {
namespace {

model::WeightView View(const HostWeights& w) {
  return {.dtype = w.dtype, .rows = w.rows, .cols = w.cols, .data = w.bytes.data()};
}

class CpuOpBackend : public OpBackend {
 public:
  explicit CpuOpBackend(int threads) : pool_(threads) {}

  std::vector<float> Embed(const HostWeights& table, const std::vector<int32_t>& ids) override {
    std::vector<float> out(ids.size() * static_cast<size_t>(table.cols));
    Ops().Embed(View(table), ids.data(), static_cast<int64_t>(ids.size()), out.data());
    return out;
  }
  std::vector<float> MatMul(const HostWeights& w, const std::vector<float>& x, int64_t m) override {
    std::vector<float> y(static_cast<size_t>(m * w.rows));
    Ops().MatMul(View(w), x.data(), m, y.data());
    return y;
  }
  std::vector<float> RmsNorm(const std::vector<float>& x, const std::vector<float>& weight, int64_t rows,
                             float eps) override {
    std::vector<float> y(x.size());
    Ops({.rms_norm_eps = eps}).RmsNorm(x.data(), weight.data(), y.data(), rows, static_cast<int64_t>(weight.size()));
    return y;
  }
  std::vector<float> Rope(const kernels::RopeParams& p, const std::vector<float>& x,
                          const std::vector<int32_t>& positions, int64_t heads) override {
    const int64_t tokens = static_cast<int64_t>(positions.size());
    std::vector<float> cos(static_cast<size_t>(tokens * p.rot_dim / 2)), sin(cos.size()), y = x;
    CpuOps ops(pool_, {.rope = p}, cos.data(), sin.data());
    const ForwardBatch batch = RopeOnlyBatch(positions);
    ops.Prepare(batch, {.placement = {.positions = batch.positions.data()}});
    ops.Rope(y.data(), tokens, heads);
    return y;
  }
  std::vector<float> SwiGlu(const std::vector<float>& gate, const std::vector<float>& up) override {
    std::vector<float> out(gate.size());
    Ops().SwiGlu(gate.data(), up.data(), out.data(), static_cast<int64_t>(gate.size()));
    return out;
  }
  std::vector<float> Add(const std::vector<float>& y, const std::vector<float>& x) override {
    std::vector<float> out = y;
    Ops().Add(out.data(), x.data(), static_cast<int64_t>(x.size()));
    return out;
  }
  std::vector<float> Attention(AttentionCase& c) override {
    const ForwardBatch& b = *c.batch;
    const kernels::TokenPlacement where{.positions = b.positions.data(),
                                        .token_chunk = b.token_chunk.data(),
                                        .block_table = b.block_table.data(),
                                        .table_width = b.max_blocks_per_chunk,
                                        .kv_slots = b.kv_slots.data()};
    CpuOps ops = Ops({.attention_scale = c.scale});
    ops.WriteKv(c.layout, where, c.k.data(), c.v.data(), b.num_tokens(), c.k_cache.data(), c.v_cache.data());
    std::vector<float> out(c.q.size());
    ops.Attention(b, c.layout, where, c.num_heads, c.q.data(), c.k_cache.data(), c.v_cache.data(), out.data());
    return out;
  }
  std::vector<float> Logits(const std::vector<float>& x, const std::vector<int32_t>& rows,
                            const std::vector<float>& norm_weight, const HostWeights& head, float eps) override {
    std::vector<float> gathered(rows.size() * static_cast<size_t>(head.cols));
    std::vector<float> logits(rows.size() * static_cast<size_t>(head.rows));
    Ops({.rms_norm_eps = eps})
        .Logits(x.data(), rows.data(), static_cast<int64_t>(rows.size()), norm_weight.data(), View(head),
                gathered.data(), logits.data());
    return logits;
  }

 private:
  CpuOps Ops(const CpuOps::Config& config = {}) { return CpuOps(pool_, config, nullptr, nullptr); }

  ThreadPool pool_;
};

}  // namespace

std::unique_ptr<OpBackend> MakeCpuOpBackend(int threads) { return std::make_unique<CpuOpBackend>(threads); }

}  // namespace kvfleet::engine::ops_test
