// The per-channel key scales of the int8_rotated_scaled KV format
// (kernels/common/kv_format.h): for each (layer, KV head, channel) a power
// of two s = 2^e, e in [0, kMaxKeyScaleExponent]; keys are stored times 1/s
// and queries are multiplied by s, both exactly. A calibration record
// carries the exponents (engine/calibration); the executor takes them
// through ExecutorOptions.
//
//   KeyChannelScales s{.num_layers = 28, .num_kv_heads = 2, .head_dim = 128, .exponents = ...};
//   RETURN_IF_ERROR(s.CheckShape(config));
//   std::vector<float> m = s.Multipliers();  // [layers, kv heads, head_dim]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kvfleet::engine {

inline constexpr int kMaxKeyScaleExponent = 15;

struct KeyChannelScales {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  std::vector<uint8_t> exponents;  // [num_layers, num_kv_heads, head_dim]

  // INVALID_ARGUMENT naming what differs when these are not for a model of
  // this shape, or an exponent is out of range.
  absl::Status CheckShape(int64_t layers, int64_t kv_heads, int64_t dim) const;
  std::vector<float> Multipliers() const;  // 2^e, in the exponents' order
  // The scales of KV heads [begin, begin + count) of every layer: a
  // tensor-parallel rank's (its KV heads, model/arch/shard_plan.h).
  KeyChannelScales ForKvHeads(int64_t begin, int64_t count) const;
  // 8 hex digits of the SHA-256 of the exponents: part of the numerics
  // identity, so KV written under other scales reads as foreign.
  std::string Digest() const;
};

}  // namespace kvfleet::engine
