#include "tests/unit/engine/executor/ops/cuda_op_backend.h"

#include <algorithm>

#include "common/check.h"
#include "engine/executor/cuda/cuda_ops.h"
#include "engine/executor/in_process_group.h"
#include "engine/executor/rank_threads.h"
#include "kernels/cuda/device_buffer.h"

namespace kvfleet::engine::ops_test {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

namespace cu = ::kvfleet::cuda;

// Every CUDA call of a test must succeed: a failure is the test's failure.
template <typename T>
T Must(absl::StatusOr<T> v) {
  CHECK(v.ok()) << v.status();
  return std::move(*v);
}
void Must(const absl::Status& s) { CHECK(s.ok()) << s; }

class CudaOpBackend : public OpBackend {
 public:
  CudaOpBackend() : stream_(Must(cu::CreateStream())) {}
  ~CudaOpBackend() override { cu::DestroyStream(stream_); }

  std::vector<float> Embed(const HostWeights& table, const std::vector<int32_t>& ids, int64_t first_row) override {
    const cu::DeviceBuffer w = Up(table.bytes), d_ids = Up(ids);
    cu::DeviceBuffer out = Poisoned<float>(ids.size() * table.cols);
    model::WeightView view = View(table, w);
    view.first_row = first_row;
    Ops({}, {.arrays = {.token_ids = d_ids.as<int32_t>()}})
        .Embed(view, static_cast<int64_t>(ids.size()), out.as<float>());
    return Down<float>(out, ids.size() * table.cols);
  }
  std::vector<float> MatMul(const HostWeights& w, const std::vector<float>& x, int64_t m) override {
    const cu::DeviceBuffer d_w = Up(w.bytes), d_x = Up(x);
    cu::DeviceBuffer y = Poisoned<float>(m * w.rows);
    Ops().MatMul(View(w, d_w), d_x.as<float>(), m, y.as<float>());
    return Down<float>(y, m * w.rows);
  }
  std::vector<float> MatMulWithLora(const HostWeights& w, const std::vector<float>& x, int64_t m,
                                    const std::vector<HostLoraSegment>& segments) override {
    const cu::DeviceBuffer d_w = Up(w.bytes), d_x = Up(x);
    cu::DeviceBuffer y = Poisoned<float>(m * w.rows);
    std::vector<cu::DeviceBuffer> pairs;
    std::vector<kernels::LoraSegment> table;
    int64_t rows = 0;
    for (const HostLoraSegment& s : segments) {
      kernels::LoraSegment seg{.first_row = s.first_row, .rows = s.rows, .rank = s.rank, .scale = s.scale};
      if (!s.a.empty()) {
        pairs.push_back(Up(s.a));
        seg.a = pairs.back().as<float>();
        pairs.push_back(Up(s.b));
        seg.b = pairs.back().as<float>();
      }
      table.push_back(seg);
      rows += s.rows;
    }
    const cu::DeviceBuffer d_table = Up(table);
    CudaOps ops = Ops({}, {.lora = {.table = d_table.as<kernels::LoraSegment>(),
                                    .count = static_cast<int32_t>(table.size()),
                                    .rows = rows}});
    ops.MatMul(View(w, d_w), d_x.as<float>(), m, y.as<float>());
    ops.AddLora({.layer = 0, .projection = model::Projection::kAttnQ}, View(w, d_w), d_x.as<float>(), m, y.as<float>());
    return Down<float>(y, m * w.rows);
  }
  std::vector<float> RmsNorm(const std::vector<float>& x, const std::vector<float>& weight, int64_t rows,
                             float eps) override {
    cu::DeviceBuffer d_x = Up(x);
    const cu::DeviceBuffer d_w = Up(weight);
    Ops({.rms_norm_eps = eps})
        .RmsNorm(d_x.as<float>(), d_w.as<float>(), d_x.as<float>(), rows, static_cast<int64_t>(weight.size()));
    return Down<float>(d_x, x.size());
  }
  std::vector<float> Rope(const kernels::RopeParams& p, const std::vector<float>& x,
                          const std::vector<int32_t>& positions, int64_t heads) override {
    // The executor's table: every position up to the largest, from RopeCosSin.
    const int32_t max_position = *std::max_element(positions.begin(), positions.end());
    std::vector<int32_t> all(static_cast<size_t>(max_position) + 1);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
    const int64_t half = p.rot_dim / 2;
    std::vector<float> cos(all.size() * half), sin(all.size() * half);
    kernels::RopeCosSin(p, all.data(), static_cast<int64_t>(all.size()), cos.data(), sin.data());
    const cu::DeviceBuffer d_cos = Up(cos), d_sin = Up(sin), d_pos = Up(positions);
    cu::DeviceBuffer d_x = Up(x);
    CudaOps ops = Ops({.ropes = {p}, .rope_cos = {d_cos.as<float>()}, .rope_sin = {d_sin.as<float>()}},
                      {.arrays = {.placement = {.positions = d_pos.as<int32_t>()}}});
    ops.Rope(d_x.as<float>(), static_cast<int64_t>(positions.size()), heads, 0);
    return Down<float>(d_x, x.size());
  }
  std::vector<float> AddBias(const std::vector<float>& y, const std::vector<float>& bias, int64_t rows) override {
    cu::DeviceBuffer d_y = Up(y);
    const cu::DeviceBuffer d_bias = Up(bias);
    Ops().AddBias(d_y.as<float>(), d_bias.as<float>(), rows, static_cast<int64_t>(bias.size()));
    return Down<float>(d_y, y.size());
  }
  std::vector<float> Scale(const std::vector<float>& x, float s) override {
    cu::DeviceBuffer d_x = Up(x);
    Ops().Scale(d_x.as<float>(), static_cast<int64_t>(x.size()), s);
    return Down<float>(d_x, x.size());
  }
  std::vector<float> GeluTanhMul(const std::vector<float>& gate, const std::vector<float>& up) override {
    const cu::DeviceBuffer g = Up(gate), u = Up(up);
    cu::DeviceBuffer out = Poisoned<float>(gate.size());
    Ops().GeluTanhMul(g.as<float>(), u.as<float>(), out.as<float>(), static_cast<int64_t>(gate.size()));
    return Down<float>(out, gate.size());
  }
  std::vector<float> Silu(const std::vector<float>& x) override {
    cu::DeviceBuffer d_x = Up(x);
    Ops().Silu(d_x.as<float>(), d_x.as<float>(), static_cast<int64_t>(x.size()));
    return Down<float>(d_x, x.size());
  }
  std::vector<float> SwiGlu(const std::vector<float>& gate, const std::vector<float>& up) override {
    const cu::DeviceBuffer g = Up(gate), u = Up(up);
    cu::DeviceBuffer out = Poisoned<float>(gate.size());
    Ops().SwiGlu(g.as<float>(), u.as<float>(), out.as<float>(), static_cast<int64_t>(gate.size()));
    return Down<float>(out, gate.size());
  }
  std::vector<float> Add(const std::vector<float>& y, const std::vector<float>& x) override {
    cu::DeviceBuffer d_y = Up(y);
    const cu::DeviceBuffer d_x = Up(x);
    Ops().Add(d_y.as<float>(), d_x.as<float>(), static_cast<int64_t>(x.size()));
    return Down<float>(d_y, y.size());
  }
  std::vector<float> Attention(AttentionCase& c) override {
    const ForwardBatch& b = *c.batch;
    const cu::DeviceBuffer positions = Up(b.positions), chunks = Up(b.token_chunk), table = Up(b.block_table),
                           slots = Up(b.kv_slots), q = Up(c.q), k = Up(c.k), v = Up(c.v);
    cu::DeviceBuffer k_cache = Up(c.k_cache), v_cache = Up(c.v_cache);
    const cu::DeviceBuffer key_scales = c.key_scales.empty() ? cu::DeviceBuffer() : Up(c.key_scales);
    cu::DeviceBuffer out = Poisoned<float>(c.q.size());
    const kernels::TokenPlacement where{.positions = positions.as<int32_t>(),
                                        .token_chunk = chunks.as<int32_t>(),
                                        .block_table = table.as<int32_t>(),
                                        .table_width = b.max_blocks_per_chunk,
                                        .kv_slots = slots.as<int64_t>()};
    // A workspace that holds a few tokens' partials only, so long cases run
    // in several groups.
    CudaAttentionWorkspace ws;
    const int64_t heads = c.num_heads, d = c.layout.head_dim;
    const int32_t parts = kernels::cuda::PartitionsFor(*std::max_element(b.positions.begin(), b.positions.end()));
    ws.item_capacity = int64_t{b.num_tokens()} * parts;
    ws.partial_capacity = 2 * kernels::cuda::TileTokens(heads / c.layout.num_kv_heads) * parts;
    const cu::DeviceBuffer items = Poisoned<uint8_t>(ws.item_capacity * sizeof(kernels::cuda::AttentionWorkItem)),
                           offsets = Poisoned<int64_t>(b.num_tokens()),
                           partial_o = Poisoned<float>(ws.partial_capacity * heads * d),
                           partial_ml = Poisoned<float>(ws.partial_capacity * heads * 2);
    ws.items = items.as<kernels::cuda::AttentionWorkItem>();
    ws.partial_offsets = offsets.as<int64_t>();
    ws.partial_o = partial_o.as<float>();
    ws.partial_ml = partial_ml.as<float>();
    uint8_t* k_layers[] = {k_cache.as<uint8_t>()};
    uint8_t* v_layers[] = {v_cache.as<uint8_t>()};
    config_ = {.group = heads / c.layout.num_kv_heads};
    CudaOps ops(stream_, config_,
                {.batch = &b,
                 .arrays = {.placement = where},
                 .kv = {.layout = c.layout,
                        .k = k_layers,
                        .v = v_layers,
                        .key_scales = c.key_scales.empty() ? nullptr : key_scales.as<float>()}},
                ws);
    ops.Prepare();
    Must(ops.status());
    ops.WriteKv(0, k.as<float>(), v.as<float>(), b.num_tokens());
    ops.Attention({.layer = 0, .num_heads = heads, .scale = c.scale, .window = c.window}, q.as<float>(),
                  out.as<float>(), b.num_tokens());
    c.k_cache = Down<uint8_t>(k_cache, c.k_cache.size());
    c.v_cache = Down<uint8_t>(v_cache, c.v_cache.size());
    return Down<float>(out, c.q.size());
  }
  std::vector<float> Logits(const std::vector<float>& x, const std::vector<int32_t>& rows,
                            const std::vector<float>& norm_weight, const HostWeights& head, float eps) override {
    const cu::DeviceBuffer d_x = Up(x), d_rows = Up(rows), d_norm = Up(norm_weight), d_head = Up(head.bytes);
    cu::DeviceBuffer gathered = Poisoned<float>(rows.size() * head.cols),
                     logits = Poisoned<float>(rows.size() * head.rows);
    Ops({.rms_norm_eps = eps}, {.arrays = {.logits_tokens = d_rows.as<int32_t>()}})
        .Logits(d_x.as<float>(), d_norm.as<float>(), View(head, d_head), gathered.as<float>(), logits.as<float>(),
                static_cast<int64_t>(rows.size()));
    return Down<float>(logits, rows.size() * head.rows);
  }

  // The host emulation's ranks meet through an in-process group, as the
  // CPU twin's; a GPU's meet over NCCL (engine_cuda_tp_test covers them).
  std::string CollectivesUnsupported() const override {
#if KVFLEET_CUDA_EMULATION
    return "";
#else
    return "on a GPU the ranks of a replica meet over NCCL, one device each: engine_cuda_tp_test runs them";
#endif
  }
  std::string NormAcrossRanksUnsupported() const override {
    return "a norm across tensor-parallel ranks is built on the CPU only";
  }
  std::vector<std::vector<float>> RmsNormAcrossRanks(const std::vector<std::vector<float>>& ranks,
                                                     const std::vector<std::vector<float>>& weights, int64_t rows,
                                                     float eps) override {
    if (ranks.size() != 1) return {};
    cu::DeviceBuffer d_x = Up(ranks[0]);
    const cu::DeviceBuffer d_w = Up(weights[0]);
    Ops({.rms_norm_eps = eps})
        .RmsNormAcrossRanks(d_x.as<float>(), d_w.as<float>(), d_x.as<float>(), rows,
                            static_cast<int64_t>(weights[0].size()));
    return {Down<float>(d_x, ranks[0].size())};
  }
  std::vector<std::vector<float>> AllReduce(const std::vector<std::vector<float>>& ranks) override {
    return Meet(ranks,
                [](CudaOps& ops, float* x, size_t size, int32_t) { ops.AllReduce(x, static_cast<int64_t>(size)); });
  }
  std::vector<std::vector<float>> AllGather(const std::vector<std::vector<float>>& ranks, int64_t rows,
                                            const std::vector<int64_t>& widths) override {
    int64_t total = 0;
    for (int64_t w : widths) total += w;
    std::vector<std::vector<float>> whole = ranks;
    for (std::vector<float>& b : whole) b.resize(static_cast<size_t>(rows * total));
    return Meet(whole, [&](CudaOps& ops, float* x, size_t, int32_t r) {
      ops.AllGather(x, rows, widths[static_cast<size_t>(r)]);
    });
  }

 private:
  // The config must outlive the ops: each call keeps its own here.
  CudaOps Ops(CudaOps::Config config = {}, const CudaOps::Step& step = {}) {
    config_ = std::move(config);
    return CudaOps(stream_, config_, step, no_attention_);
  }

  static model::WeightView View(const HostWeights& w, const cu::DeviceBuffer& data) {
    return {.dtype = w.dtype, .rows = w.rows, .cols = w.cols, .data = data.get()};
  }

  template <typename T>
  cu::DeviceBuffer Up(const std::vector<T>& host) {
    cu::DeviceBuffer b = Must(cu::DeviceBuffer::Allocate(std::max<size_t>(16, host.size() * sizeof(T))));
    Must(cu::CopyToDevice(b.get(), host.data(), host.size() * sizeof(T), stream_));
    return b;
  }
  // Poisoned (0xff bytes: NaN floats) rather than zeroed, so an output the
  // kernels never write shows up.
  template <typename T>
  cu::DeviceBuffer Poisoned(size_t n) {
    cu::DeviceBuffer b = Must(cu::DeviceBuffer::Allocate(std::max<size_t>(16, n * sizeof(T))));
    Must(cu::Memset(b.get(), 0xff, n * sizeof(T), stream_));
    return b;
  }
  template <typename T>
  std::vector<T> Down(const cu::DeviceBuffer& b, size_t n) {
    std::vector<T> host(n);
    Must(cu::CopyToHost(host.data(), b.get(), n * sizeof(T), stream_));
    Must(cu::Synchronize(stream_));
    Must(cu::CheckLaunches("an op harness case"));
    return host;
  }

  // fn(ops, rank's device buffer, its size, rank) on each rank's thread, the
  // ranks meeting through one in-process group; every rank's buffer after.
  template <class Fn>
  std::vector<std::vector<float>> Meet(const std::vector<std::vector<float>>& ranks, Fn fn) {
    const int32_t n = static_cast<int32_t>(ranks.size());
    InProcessGroup group(n);
    RankThreads threads(n);
    std::vector<cu::DeviceBuffer> buffers;
    for (const std::vector<float>& r : ranks) buffers.push_back(Up(r));
    Must(cu::Synchronize(stream_));
    std::vector<CudaOps::Config> configs(static_cast<size_t>(n));
    threads.Run([&](int32_t r) {
      configs[r].collective = &group.rank(r);
      group.BeginTurn(r);
      CudaOps ops(stream_, configs[r], {}, no_attention_);
      fn(ops, buffers[r].as<float>(), ranks[r].size(), r);
      group.EndTurn(r);
    });
    std::vector<std::vector<float>> out;
    for (int32_t r = 0; r < n; ++r) out.push_back(Down<float>(buffers[r], ranks[r].size()));
    return out;
  }

  cu::Stream stream_;
  CudaOps::Config config_;
  CudaAttentionWorkspace no_attention_;
};

}  // namespace

std::unique_ptr<OpBackend> MakeCudaOpBackend(int device, std::string* why) {
  if (device >= cu::DeviceCount(why)) return nullptr;
  Must(cu::SetDevice(device));
  return std::make_unique<CudaOpBackend>();
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine::ops_test
