// The lower KV tiers over an executor's cache: the executor's block copies
// as the tiers' KvBlockCopier, its geometry and numerics as the block
// format, its (page-locked on a GPU) host memory for the host tier.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/executor/model_executor.h"
#include "engine/kv/tiers/kv_tier_manager.h"

namespace kvfleet::engine {

// The block format the executor's cache copies in (block_bytes 0 when it
// cannot copy blocks).
KvBlockFormat KvBlockFormatOf(const ExecutorInfo& info);

// KvTierManager::Create over `executor`, which must outlive the result.
absl::StatusOr<std::unique_ptr<KvTierManager>> CreateKvTiers(const KvTierOptions& options, ModelExecutor& executor,
                                                             std::string_view model_id, KvEventListener* next);

}  // namespace kvfleet::engine
