// The KV tier's one conversion pair between its plain form (common/kv_tier.h)
// and its wire form (v1::KvTier), used by the worker's event publisher and
// the cachemanager's event parser.
#pragma once

#include <optional>

#include "common/kv_tier.h"
#include "kvfleet/v1/cachemanager.pb.h"

namespace kvfleet::transport {

v1::KvTier ToProto(KvTier tier);
// nullopt for a value that names no tier (a newer peer's, or garbage).
std::optional<KvTier> FromProto(v1::KvTier tier);

}  // namespace kvfleet::transport
