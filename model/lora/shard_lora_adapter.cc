#include "model/lora/shard_lora_adapter.h"

#include <utility>

namespace kvfleet::model {
namespace {

// B's rows [begin, begin + count): the rank's outputs.
LoraPair OutputRows(const LoraPair& p, int64_t rank, int64_t begin, int64_t count) {
  LoraPair s{.in = p.in, .out = count, .a = p.a};
  s.b.assign(p.b.begin() + begin * rank, p.b.begin() + (begin + count) * rank);
  return s;
}

// A's columns [begin, begin + count) of each rank row: the rank's inputs.
LoraPair InputColumns(const LoraPair& p, int64_t rank, int64_t begin, int64_t count) {
  LoraPair s{.in = count, .out = p.out, .b = p.b};
  s.a.reserve(static_cast<size_t>(rank * count));
  for (int64_t r = 0; r < rank; ++r) {
    const auto row = p.a.begin() + r * p.in;
    s.a.insert(s.a.end(), row + begin, row + begin + count);
  }
  return s;
}

}  // namespace

LoraAdapter ShardLoraAdapter(const LoraAdapter& adapter, const ModelConfig& config, const RankShare& share) {
  LoraAdapter out{.name = adapter.name,
                  .digest = adapter.digest,
                  .rank = adapter.rank,
                  .alpha = adapter.alpha,
                  .rslora = adapter.rslora,
                  .scale = adapter.scale};
  const int64_t hd = config.head_dim;
  const int64_t r = adapter.rank;
  out.layers.resize(adapter.layers.size());
  for (size_t l = 0; l < adapter.layers.size(); ++l) {
    const auto& in = adapter.layers[l];
    auto& s = out.layers[l];
    const auto cut = [&](Projection p, auto&& fn) {
      const std::optional<LoraPair>& pair = in[static_cast<size_t>(p)];
      if (pair.has_value()) s[static_cast<size_t>(p)] = fn(*pair);
    };
    cut(Projection::kAttnQ,
        [&](const LoraPair& p) { return OutputRows(p, r, share.q_head_begin * hd, share.q_heads * hd); });
    cut(Projection::kAttnK,
        [&](const LoraPair& p) { return OutputRows(p, r, share.kv_head_begin * hd, share.kv_heads * hd); });
    cut(Projection::kAttnV,
        [&](const LoraPair& p) { return OutputRows(p, r, share.kv_head_begin * hd, share.kv_heads * hd); });
    cut(Projection::kFfnGate, [&](const LoraPair& p) { return OutputRows(p, r, share.ffn_begin, share.ffn_columns); });
    cut(Projection::kFfnUp, [&](const LoraPair& p) { return OutputRows(p, r, share.ffn_begin, share.ffn_columns); });
    cut(Projection::kAttnOutput,
        [&](const LoraPair& p) { return InputColumns(p, r, share.q_head_begin * hd, share.q_heads * hd); });
    cut(Projection::kFfnDown,
        [&](const LoraPair& p) { return InputColumns(p, r, share.ffn_begin, share.ffn_columns); });
  }
  return out;
}

}  // namespace kvfleet::model
