#include "engine/executor/model_executor.h"

#include <new>

namespace kvfleet::engine {

absl::Status ModelExecutor::CopyKvBlockOut(BlockId, std::span<uint8_t>) {
  return absl::UnimplementedError("this executor cannot copy KV blocks out (no lower KV tiers)");
}

absl::Status ModelExecutor::CopyKvBlockIn(BlockId, std::span<const uint8_t>) {
  return absl::UnimplementedError("this executor cannot copy KV blocks in (no lower KV tiers)");
}

absl::Status ModelExecutor::MoveKvSlots(std::span<const int64_t>, std::span<const int64_t>) {
  return absl::UnimplementedError("this executor cannot move KV between slots");
}

absl::Status ModelExecutor::LoadDraftHeads(std::shared_ptr<const model::DraftHeads>) {
  return absl::UnimplementedError("this executor cannot run draft heads");
}

absl::StatusOr<std::span<const float>> ModelExecutor::RunDraftHeads(std::span<const float>, int64_t, int32_t) {
  return absl::UnimplementedError("this executor cannot run draft heads");
}

std::shared_ptr<uint8_t> ModelExecutor::AllocateHostMemory(size_t bytes) {
  // Untouched pages cost nothing until a block lands in them.
  return std::shared_ptr<uint8_t>(new (std::nothrow) uint8_t[bytes], std::default_delete<uint8_t[]>());
}

}  // namespace kvfleet::engine
