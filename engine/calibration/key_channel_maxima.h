// int8_rotated_scaled's key channel scales, measured: the largest |key| of
// every (layer, KV head, channel) over a calibration text, read back from a
// float16 KV cache after each window, and the rule that turns them into
// powers of two (KeyChannelScales).
//
// The rule: a channel's exponent is round(log2(max / median) / 2), clamped
// to [0, kMaxKeyScaleExponent], where the median is over its (layer, KV
// head)'s channels. Half the log ratio (a square root) splits the outlier
// between keys and queries, as SmoothQuant's migration strength 0.5 does:
// keys are divided by the scale, queries multiplied by it, so neither side's
// range grows by more than the square root of the outlier's.
//
//   KeyChannelMaxima maxima(config.num_layers, config.num_kv_heads, config.head_dim);
//   for each block of a window: maxima.AddBlock(bytes, one_block_layout, tokens_in_block);
//   KeyChannelScales scales = maxima.Scales();
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/executor/key_channel_scales.h"
#include "kernels/common/paged_kv.h"

namespace kvfleet::engine {

inline constexpr char kKeyScaleRule[] =
    "per (layer, KV head, channel): 2^round(log2(max|k| / median over the head's channels) / 2), clamped to "
    "[1, 2^15]; max|k| over the calibration text's keys after RoPE, from a float16 KV cache";

class KeyChannelMaxima {
 public:
  KeyChannelMaxima(int64_t layers, int64_t kv_heads, int64_t head_dim);

  // One page as ModelExecutor::CopyKvBlockOut gives it for a float16 cache
  // with every layer on the page (layer by layer, K then V, each `layout`
  // with num_blocks 1); its first `tokens` slots hold keys.
  void AddBlock(std::span<const uint8_t> page, const kernels::KvCacheLayout& layout, int64_t tokens);

  KeyChannelScales Scales() const;

 private:
  int64_t layers_, kv_heads_, head_dim_;
  std::vector<float> max_abs_;  // [layers, kv_heads, head_dim]
};

}  // namespace kvfleet::engine
