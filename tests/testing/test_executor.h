// Executors for tests, from the one factory: the CPU backend with batch
// limits roomy enough for any scheduler a tiny-model test uses (a tiny
// vocabulary keeps even 4096 logits rows small).
//
//   std::unique_ptr<engine::ModelExecutor> ex = testing::NewTinyExecutor(*model, /*num_blocks=*/64, /*block_size=*/4);
#pragma once

#include <cstdint>
#include <memory>

#include "model/llama_model.h"
#include "services/worker/engine/executor/model_executor.h"

namespace kvfleet::testing {

inline constexpr engine::ExecutorLimits kRoomyLimits{.max_batch_tokens = 4096, .max_batch_chunks = 256};

// CHECK-fails (the test cannot go on) when the executor cannot be made.
std::unique_ptr<engine::ModelExecutor> NewExecutor(const model::LlamaModel& model,
                                                   const engine::ExecutorOptions& options);

// The CPU executor with kRoomyLimits.
std::unique_ptr<engine::ModelExecutor> NewTinyExecutor(const model::LlamaModel& model, int64_t num_blocks,
                                                       int64_t block_size, int threads = 2);

}  // namespace kvfleet::testing
