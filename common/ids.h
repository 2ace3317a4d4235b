// Strong ids shared across modules. Block ids index the KV block pool; a
// block table is the list of physical blocks holding a sequence's positions.
// Request ids name one generation request end to end.
//
//   BlockId b(7);
//   std::vector<BlockId> table = {BlockId(0), BlockId(7)};
#pragma once

#include <cstdint>

#include "common/strong_id.h"

namespace kvfleet {

using BlockId = StrongId<struct BlockIdTag, int32_t>;
using RequestId = StrongId<struct RequestIdTag, uint64_t>;

}  // namespace kvfleet
