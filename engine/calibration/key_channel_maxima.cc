#include "engine/calibration/key_channel_maxima.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "common/float16.h"

namespace kvfleet::engine {

KeyChannelMaxima::KeyChannelMaxima(int64_t layers, int64_t kv_heads, int64_t head_dim)
    : layers_(layers),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      max_abs_(static_cast<size_t>(layers * kv_heads * head_dim), 0.0f) {}

void KeyChannelMaxima::AddBlock(std::span<const uint8_t> page, const kernels::KvCacheLayout& layout, int64_t tokens) {
  CHECK(layout.dtype == kernels::KvCacheDtype::kF16 && layout.num_blocks == 1 && layout.num_kv_heads == kv_heads_ &&
        layout.head_dim == head_dim_)
      << "key maxima are read from a float16 page of this model";
  const int64_t piece = layout.BytesPerLayer();
  CHECK(static_cast<int64_t>(page.size()) == 2 * layers_ * piece) << "a page of every layer's K and V";
  for (int64_t l = 0; l < layers_; ++l) {
    const uint8_t* k = page.data() + 2 * l * piece;
    for (int64_t h = 0; h < kv_heads_; ++h) {
      float* max_abs = max_abs_.data() + (l * kv_heads_ + h) * head_dim_;
      for (int64_t slot = 0; slot < tokens; ++slot) {
        const uint8_t* row = k + layout.RowOffset(0, h, slot);
        for (int64_t c = 0; c < head_dim_; ++c) {
          uint16_t bits;
          std::memcpy(&bits, row + 2 * c, sizeof(bits));
          max_abs[c] = std::max(max_abs[c], std::fabs(HalfToFloat(bits)));
        }
      }
    }
  }
}

KeyChannelScales KeyChannelMaxima::Scales() const {
  KeyChannelScales s{.num_layers = layers_, .num_kv_heads = kv_heads_, .head_dim = head_dim_};
  s.exponents.resize(max_abs_.size());
  for (int64_t row = 0; row < layers_ * kv_heads_; ++row) {
    const float* m = max_abs_.data() + row * head_dim_;
    std::vector<float> sorted(m, m + head_dim_);
    std::nth_element(sorted.begin(), sorted.begin() + head_dim_ / 2, sorted.end());
    const float median = sorted[static_cast<size_t>(head_dim_ / 2)];
    for (int64_t c = 0; c < head_dim_; ++c) {
      int e = 0;
      if (median > 0 && m[c] > median) {
        e = static_cast<int>(std::lround(std::log2(static_cast<double>(m[c]) / median) / 2));
      }
      s.exponents[static_cast<size_t>(row * head_dim_ + c)] =
          static_cast<uint8_t>(std::clamp(e, 0, kMaxKeyScaleExponent));
    }
  }
  return s;
}

}  // namespace kvfleet::engine
