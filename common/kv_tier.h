// Where a worker holds a KV block: in its accelerator's cache (the only tier
// a forward pass reads), or below it in host memory or on local disk, from
// where it is loaded back instead of recomputed. Shared by the engine, the
// KV events and the cachemanager's index.
#pragma once

#include <cstdint>
#include <string_view>

namespace kvfleet {

// Ordered fastest first: a lower value is a better copy.
enum class KvTier : uint8_t { kDevice = 0, kHost = 1, kDisk = 2 };

inline constexpr int kNumKvTiers = 3;

inline constexpr std::string_view KvTierName(KvTier tier) {
  switch (tier) {
    case KvTier::kDevice:
      return "device";
    case KvTier::kHost:
      return "host";
    case KvTier::kDisk:
      return "disk";
  }
  return "unknown";
}

}  // namespace kvfleet
