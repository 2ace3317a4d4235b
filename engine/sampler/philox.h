// Philox4x32-10, a counter-based random number generator (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011). The output is a
// pure function of (key, counter), so a request's random draw at a position
// is the same whether it runs alone, batched, preempted and recomputed, or on
// another worker after failover.
//
//   double u = UniformAt(/*seed=*/42, /*position=*/17, /*stream=*/0);  // [0, 1)
#pragma once

#include <array>
#include <cstdint>

namespace kvfleet::engine {

inline std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57, kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
    key = {key[0] + kW0, key[1] + kW1};
  }
  return ctr;
}

// A uniform double in [0, 1) for (seed, position, stream); `stream` separates
// independent draws at the same position (e.g. speculative acceptance).
inline double UniformAt(uint64_t seed, uint64_t position, uint32_t stream) {
  const auto r = Philox4x32({static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32), stream, 0},
                            {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  const uint64_t bits53 = ((static_cast<uint64_t>(r[0]) << 32) | r[1]) >> 11;
  return static_cast<double>(bits53) * 0x1.0p-53;
}

}  // namespace kvfleet::engine
