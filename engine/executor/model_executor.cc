#include "engine/executor/model_executor.h"

namespace kvfleet::engine {

absl::Status ModelExecutor::CopyKvBlockOut(BlockId, std::span<uint8_t>) {
  return absl::UnimplementedError("this executor cannot copy KV blocks out (no lower KV tiers)");
}

absl::Status ModelExecutor::CopyKvBlockIn(BlockId, std::span<const uint8_t>) {
  return absl::UnimplementedError("this executor cannot copy KV blocks in (no lower KV tiers)");
}

}  // namespace kvfleet::engine
