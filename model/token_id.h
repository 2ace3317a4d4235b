// The id of a vocabulary entry. A plain alias rather than a StrongId:
// token ids index logits and embeddings everywhere, and they are never
// confused with other ids because they only travel in token sequences.
#pragma once

#include <cstdint>

namespace kvfleet::model {

using TokenId = int32_t;

}  // namespace kvfleet::model
