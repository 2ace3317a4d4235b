#include "model/arch/shard_weights.h"

#include <cstring>
#include <new>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/dtype.h"

namespace kvfleet::model {

namespace {

int64_t BlockOf(DType t) { return Traits(t).block_elems; }

// Rows [begin, begin + count) of a matrix, in place.
WeightView Rows(const WeightView& w, int64_t begin, int64_t count) {
  WeightView out = w;
  out.rows = count;
  out.data = static_cast<const uint8_t*>(w.data) + begin * RowBytes(w.dtype, w.cols);
  return out;
}

// Values [begin, begin + count) of a float vector, in place.
WeightView Values(const WeightView& v, int64_t begin, int64_t count) {
  if (!v.present()) return v;
  WeightView out = v;
  out.cols = count;
  out.data = v.f32() + begin;
  return out;
}

// Columns [begin, begin + count) of every row, copied.
absl::StatusOr<WeightView> Columns(const WeightView& w, int64_t begin, int64_t count, ShardStorage& copies) {
  const int64_t block = BlockOf(w.dtype);
  if (begin % block != 0 || count % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", w.name, "' (", DTypeName(w.dtype), ", ", block,
                                                   "-value blocks) cannot be cut at columns [", begin, ", ",
                                                   begin + count, ") for tensor parallelism"));
  }
  const int64_t row_bytes = RowBytes(w.dtype, w.cols), skip = RowBytes(w.dtype, begin), take = RowBytes(w.dtype, count);
  copies.emplace_back(new (std::nothrow) uint8_t[static_cast<size_t>(w.rows * take)]);
  uint8_t* out = copies.back().get();
  if (out == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no host memory for a tensor-parallel rank's copy of '", w.name, "'"));
  }
  const auto* in = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r) {
    std::memcpy(out + r * take, in + r * row_bytes + skip, static_cast<size_t>(take));
  }
  WeightView view = w;
  view.cols = count;
  view.data = out;
  return view;
}

}  // namespace

ModelConfig ShardConfig(const ModelConfig& config, const RankShare& share) {
  ModelConfig c = config;
  c.num_heads = share.q_heads;
  c.num_kv_heads = share.kv_heads;
  c.ffn_size = share.ffn_columns;
  return c;
}

absl::StatusOr<DecoderWeights> ShardWeights(const DecoderWeights& weights, const ModelConfig& config,
                                            const RankShare& share, ShardStorage& copies) {
  const int64_t hd = config.head_dim;
  DecoderWeights out;
  out.output_norm = weights.output_norm;
  out.token_embd = Rows(weights.token_embd, share.vocab_begin, share.vocab_rows);
  out.token_embd.first_row = share.vocab_begin;
  out.output = Rows(weights.output, share.vocab_begin, share.vocab_rows);
  out.output.first_row = share.vocab_begin;
  for (const LayerWeights& l : weights.layers) {
    LayerWeights s = l;
    // A norm over the whole projection (OLMo 2) keeps the rank's heads'
    // values; one per head (Qwen3, Gemma 3) is every rank's.
    if (l.attn_q_norm.present() && l.attn_q_norm.cols != hd) {
      s.attn_q_norm = Values(l.attn_q_norm, share.q_head_begin * hd, share.q_heads * hd);
    }
    if (l.attn_k_norm.present() && l.attn_k_norm.cols != hd) {
      s.attn_k_norm = Values(l.attn_k_norm, share.kv_head_begin * hd, share.kv_heads * hd);
    }
    s.attn_q = Rows(l.attn_q, share.q_head_begin * hd, share.q_heads * hd);
    s.attn_k = Rows(l.attn_k, share.kv_head_begin * hd, share.kv_heads * hd);
    s.attn_v = Rows(l.attn_v, share.kv_head_begin * hd, share.kv_heads * hd);
    s.attn_q_bias = Values(l.attn_q_bias, share.q_head_begin * hd, share.q_heads * hd);
    s.attn_k_bias = Values(l.attn_k_bias, share.kv_head_begin * hd, share.kv_heads * hd);
    s.attn_v_bias = Values(l.attn_v_bias, share.kv_head_begin * hd, share.kv_heads * hd);
    s.ffn_gate = Rows(l.ffn_gate, share.ffn_begin, share.ffn_columns);
    s.ffn_up = Rows(l.ffn_up, share.ffn_begin, share.ffn_columns);
    auto output = Columns(l.attn_output, share.q_head_begin * hd, share.q_heads * hd, copies);
    if (!output.ok()) return output.status();
    s.attn_output = *output;
    auto down = Columns(l.ffn_down, share.ffn_begin, share.ffn_columns, copies);
    if (!down.ok()) return down.status();
    s.ffn_down = *down;
    out.layers.push_back(std::move(s));
  }
  return out;
}

int64_t ShardWeightBytes(const DecoderWeights& weights) {
  DecoderWeights w = weights;
  std::unordered_set<const void*> seen;
  int64_t bytes = 0;
  w.ForEach([&](WeightView& v) {
    if (seen.insert(v.data).second) bytes += v.bytes();
  });
  return bytes;
}

}  // namespace kvfleet::model
