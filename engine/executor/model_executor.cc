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

absl::Status ModelExecutor::LoadLora(int32_t, std::shared_ptr<const model::LoraAdapter>) {
  return absl::UnimplementedError("this executor cannot run LoRA adapters");
}

absl::Status ModelExecutor::UnloadLora(int32_t) {
  return absl::UnimplementedError("this executor cannot run LoRA adapters");
}

int64_t LoraSlotBytes(const model::ModelConfig& c, int32_t rank) {
  const int64_t q = c.num_heads * c.head_dim;
  const int64_t kv = c.num_kv_heads * c.head_dim;
  // (out + in) per projection: B is [out, rank], A [rank, in].
  const int64_t per_layer = (q + c.hidden_size) * 2 + (kv + c.hidden_size) * 2 + (c.ffn_size + c.hidden_size) * 3;
  return per_layer * c.num_layers * rank * static_cast<int64_t>(sizeof(float));
}

std::shared_ptr<uint8_t> ModelExecutor::AllocateHostMemory(size_t bytes) {
  // Untouched pages cost nothing until a block lands in them.
  return std::shared_ptr<uint8_t>(new (std::nothrow) uint8_t[bytes], std::default_delete<uint8_t[]>());
}

}  // namespace kvfleet::engine
