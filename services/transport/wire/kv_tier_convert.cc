#include "services/transport/wire/kv_tier_convert.h"

namespace kvfleet::transport {

v1::KvTier ToProto(KvTier tier) {
  switch (tier) {
    case KvTier::kHost:
      return v1::KV_TIER_HOST;
    case KvTier::kDisk:
      return v1::KV_TIER_DISK;
    case KvTier::kDevice:
      break;
  }
  return v1::KV_TIER_DEVICE;
}

std::optional<KvTier> FromProto(v1::KvTier tier) {
  switch (tier) {
    case v1::KV_TIER_DEVICE:
      return KvTier::kDevice;
    case v1::KV_TIER_HOST:
      return KvTier::kHost;
    case v1::KV_TIER_DISK:
      return KvTier::kDisk;
    default:
      return std::nullopt;
  }
}

}  // namespace kvfleet::transport
