#include "tests/unit/engine/executor/ops/cpu_op_backend.h"

#include "common/thread_pool.h"
#include "engine/executor/cpu/cpu_ops.h"
#include "engine/executor/in_process_group.h"
#include "engine/executor/rank_threads.h"

namespace kvfleet::engine::ops_test {
namespace {

model::WeightView View(const HostWeights& w) {
  return {.dtype = w.dtype, .rows = w.rows, .cols = w.cols, .data = w.bytes.data()};
}

class CpuOpBackend : public OpBackend {
 public:
  explicit CpuOpBackend(int threads) : pool_(threads) {}

  std::vector<float> Embed(const HostWeights& table, const std::vector<int32_t>& ids, int64_t first_row) override {
    std::vector<float> out(ids.size() * static_cast<size_t>(table.cols));
    const int64_t n = static_cast<int64_t>(ids.size());
    model::WeightView view = View(table);
    view.first_row = first_row;
    Ops({}, {.arrays = {.token_ids = ids.data()}, .num_tokens = n}).Embed(view, n, out.data());
    return out;
  }
  std::vector<float> MatMul(const HostWeights& w, const std::vector<float>& x, int64_t m) override {
    std::vector<float> y(static_cast<size_t>(m * w.rows));
    Ops().MatMul(View(w), x.data(), m, y.data());
    return y;
  }
  std::vector<float> MatMulWithLora(const HostWeights& w, const std::vector<float>& x, int64_t m,
                                    const std::vector<HostLoraSegment>& segments) override {
    std::vector<float> y(static_cast<size_t>(m * w.rows));
    std::vector<kernels::LoraSegment> table;
    int64_t rows = 0;
    for (const HostLoraSegment& s : segments) {
      table.push_back({.first_row = s.first_row,
                       .rows = s.rows,
                       .rank = s.rank,
                       .scale = s.scale,
                       .a = s.a.empty() ? nullptr : s.a.data(),
                       .b = s.b.empty() ? nullptr : s.b.data()});
      rows += s.rows;
    }
    CpuOps ops = Ops({}, {.lora = {.table = table.data(), .count = static_cast<int32_t>(table.size()), .rows = rows}});
    ops.MatMul(View(w), x.data(), m, y.data());
    ops.AddLora({.layer = 0, .projection = model::Projection::kAttnQ}, View(w), x.data(), m, y.data());
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
    const CpuOps::Config config{.ropes = {p}};
    std::vector<float> scratch(static_cast<size_t>(config.RopeScratchFloats(tokens))), y = x;
    CpuOps ops(pool_, config, {.arrays = {.placement = {.positions = positions.data()}}, .num_tokens = tokens},
               scratch.data());
    ops.Prepare();
    ops.Rope(y.data(), tokens, heads, 0);
    return y;
  }
  std::vector<float> AddBias(const std::vector<float>& y, const std::vector<float>& bias, int64_t rows) override {
    std::vector<float> out = y;
    Ops().AddBias(out.data(), bias.data(), rows, static_cast<int64_t>(bias.size()));
    return out;
  }
  std::vector<float> Scale(const std::vector<float>& x, float s) override {
    std::vector<float> out = x;
    Ops().Scale(out.data(), static_cast<int64_t>(out.size()), s);
    return out;
  }
  std::vector<float> SwiGlu(const std::vector<float>& gate, const std::vector<float>& up) override {
    std::vector<float> out(gate.size());
    Ops().SwiGlu(gate.data(), up.data(), out.data(), static_cast<int64_t>(gate.size()));
    return out;
  }
  std::vector<float> Silu(const std::vector<float>& x) override {
    std::vector<float> out = x;
    Ops().Silu(out.data(), out.data(), static_cast<int64_t>(out.size()));
    return out;
  }
  std::vector<float> GeluTanhMul(const std::vector<float>& gate, const std::vector<float>& up) override {
    std::vector<float> out(gate.size());
    Ops().GeluTanhMul(gate.data(), up.data(), out.data(), static_cast<int64_t>(gate.size()));
    return out;
  }
  std::vector<float> Add(const std::vector<float>& y, const std::vector<float>& x) override {
    std::vector<float> out = y;
    Ops().Add(out.data(), x.data(), static_cast<int64_t>(x.size()));
    return out;
  }
  std::vector<float> Attention(AttentionCase& c) override {
    const ForwardBatch& b = *c.batch;
    uint8_t* k_layers[] = {c.k_cache.data()};
    uint8_t* v_layers[] = {c.v_cache.data()};
    CpuOps ops = Ops({}, {.arrays = HostArrays(b),
                          .kv = {.layout = c.layout,
                                 .k = k_layers,
                                 .v = v_layers,
                                 .key_scales = c.key_scales.empty() ? nullptr : c.key_scales.data()},
                          .num_tokens = b.num_tokens()});
    ops.WriteKv(0, c.k.data(), c.v.data(), b.num_tokens());
    std::vector<float> out(c.q.size());
    ops.Attention({.layer = 0, .num_heads = c.num_heads, .scale = c.scale, .window = c.window}, c.q.data(), out.data(),
                  b.num_tokens());
    return out;
  }
  std::vector<float> Logits(const std::vector<float>& x, const std::vector<int32_t>& rows,
                            const std::vector<float>& norm_weight, const HostWeights& head, float eps) override {
    std::vector<float> gathered(rows.size() * static_cast<size_t>(head.cols));
    std::vector<float> logits(rows.size() * static_cast<size_t>(head.rows));
    Ops({.rms_norm_eps = eps}, {.arrays = {.logits_tokens = rows.data()}})
        .Logits(x.data(), norm_weight.data(), View(head), gathered.data(), logits.data(),
                static_cast<int64_t>(rows.size()));
    return logits;
  }

  std::vector<std::vector<float>> AllReduce(const std::vector<std::vector<float>>& ranks) override {
    std::vector<std::vector<float>> out = ranks;
    Meet(static_cast<int32_t>(ranks.size()),
         [&](CpuOps& ops, int32_t r) { ops.AllReduce(out[r].data(), static_cast<int64_t>(out[r].size())); });
    return out;
  }
  std::vector<std::vector<float>> RmsNormAcrossRanks(const std::vector<std::vector<float>>& ranks,
                                                     const std::vector<std::vector<float>>& weights, int64_t rows,
                                                     float eps) override {
    std::vector<std::vector<float>> out = ranks;
    if (ranks.size() == 1) {
      Ops({.rms_norm_eps = eps})
          .RmsNormAcrossRanks(out[0].data(), weights[0].data(), out[0].data(), rows,
                              static_cast<int64_t>(weights[0].size()));
      return out;
    }
    Meet(
        static_cast<int32_t>(ranks.size()),
        [&](CpuOps& ops, int32_t r) {
          ops.RmsNormAcrossRanks(out[r].data(), weights[r].data(), out[r].data(), rows,
                                 static_cast<int64_t>(weights[r].size()));
        },
        eps);
    return out;
  }
  std::vector<std::vector<float>> AllGather(const std::vector<std::vector<float>>& ranks, int64_t rows,
                                            const std::vector<int64_t>& widths) override {
    int64_t total = 0;
    for (int64_t w : widths) total += w;
    std::vector<std::vector<float>> out = ranks;
    for (std::vector<float>& b : out) b.resize(static_cast<size_t>(rows * total));
    Meet(static_cast<int32_t>(ranks.size()),
         [&](CpuOps& ops, int32_t r) { ops.AllGather(out[r].data(), rows, widths[r]); });
    return out;
  }

 private:
  // fn(ops, r) on each of `ranks` threads, each rank's ops meeting the
  // others' through one in-process group, in turn as the CPU twin's ranks.
  template <class Fn>
  void Meet(int32_t ranks, Fn fn, float eps = 1e-5f) {
    InProcessGroup group(ranks);
    RankThreads threads(ranks);
    std::vector<CpuOps::Config> configs(static_cast<size_t>(ranks));
    threads.Run([&](int32_t r) {
      configs[r].collective = &group.rank(r);
      configs[r].rms_norm_eps = eps;
      CpuOps ops(pool_, configs[r], {}, nullptr);
      group.BeginTurn(r);
      fn(ops, r);
      group.EndTurn(r);
    });
  }
  // The config must outlive the ops: each call keeps its own here.
  CpuOps Ops(CpuOps::Config config = {}, const CpuOps::Step& step = {}) {
    config_ = std::move(config);
    return CpuOps(pool_, config_, step, nullptr);
  }

  ThreadPool pool_;
  CpuOps::Config config_;
};

}  // namespace

std::unique_ptr<OpBackend> MakeCpuOpBackend(int threads) { return std::make_unique<CpuOpBackend>(threads); }

}  // namespace kvfleet::engine::ops_test
