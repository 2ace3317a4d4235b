#include "engine/executor/key_channel_scales.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace kvfleet::engine {

absl::Status KeyChannelScales::CheckShape(int64_t layers, int64_t kv_heads, int64_t dim) const {
  if (num_layers != layers || num_kv_heads != kv_heads || head_dim != dim) {
    return absl::InvalidArgumentError(absl::StrCat("the key channel scales are for ", num_layers, " layers x ",
                                                   num_kv_heads, " KV heads x ", head_dim, " channels; this model has ",
                                                   layers, " x ", kv_heads, " x ", dim,
                                                   " (recalibrate it: kvfleet eval --calibrate)"));
  }
  if (static_cast<int64_t>(exponents.size()) != layers * kv_heads * dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("the key channel scales hold ", exponents.size(), " exponents, not ", layers * kv_heads * dim));
  }
  for (uint8_t e : exponents) {
    if (e > kMaxKeyScaleExponent) {
      return absl::InvalidArgumentError(
          absl::StrCat("a key channel scale exponent of ", e, " is above ", kMaxKeyScaleExponent));
    }
  }
  return absl::OkStatus();
}

std::vector<float> KeyChannelScales::Multipliers() const {
  std::vector<float> m(exponents.size());
  for (size_t i = 0; i < exponents.size(); ++i) m[i] = std::ldexp(1.0f, exponents[i]);
  return m;
}

KeyChannelScales KeyChannelScales::ForKvHeads(int64_t begin, int64_t count) const {
  KeyChannelScales out{.num_layers = num_layers, .num_kv_heads = count, .head_dim = head_dim};
  for (int64_t l = 0; l < num_layers; ++l) {
    const auto from = exponents.begin() + (l * num_kv_heads + begin) * head_dim;
    out.exponents.insert(out.exponents.end(), from, from + count * head_dim);
  }
  return out;
}

std::string KeyChannelScales::Digest() const {
  return Sha256Hex(std::string(exponents.begin(), exponents.end())).substr(0, 8);
}

}  // namespace kvfleet::engine
