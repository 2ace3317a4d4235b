#include "engine/executor_kv_tiers.h"

namespace kvfleet::engine {
namespace {

class ExecutorKvBlockCopier final : public KvBlockCopier {
 public:
  explicit ExecutorKvBlockCopier(ModelExecutor& executor) : executor_(executor) {}
  absl::Status CopyKvBlockOut(BlockId block, std::span<uint8_t> out) override {
    return executor_.CopyKvBlockOut(block, out);
  }
  absl::Status CopyKvBlockIn(BlockId block, std::span<const uint8_t> in) override {
    return executor_.CopyKvBlockIn(block, in);
  }

 private:
  ModelExecutor& executor_;
};

}  // namespace

KvBlockFormat KvBlockFormatOf(const ExecutorInfo& info) {
  return {.block_bytes = info.kv_block_bytes, .block_size = info.block_size, .numerics = info.numerics};
}

absl::StatusOr<std::unique_ptr<KvTierManager>> CreateKvTiers(const KvTierOptions& options, ModelExecutor& executor,
                                                             std::string_view model_id, KvEventListener* next) {
  return KvTierManager::Create(
      options, std::make_unique<ExecutorKvBlockCopier>(executor), KvBlockFormatOf(executor.info()),
      [&executor](size_t bytes) { return executor.AllocateHostMemory(bytes); }, model_id, next);
}

}  // namespace kvfleet::engine
