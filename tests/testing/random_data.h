// Deterministic pseudo-random test data, the same on every platform
// (std::mt19937 is fully specified; the standard distributions are not).
//
//   std::vector<float> x = RandomFloats(1024, /*seed=*/3, /*scale=*/2.0f);  // in [-scale, scale]
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kvfleet::testing {

inline std::vector<float> RandomFloats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(static_cast<int32_t>(gen() % 2001) - 1000) / 1000.0f * scale;
  return v;
}

}  // namespace kvfleet::testing
