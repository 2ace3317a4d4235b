// Executors for tests. A test binary links one implementation, which decides
// the backend its engine and executor tests run on, so the same test sources
// check every backend:
//   test_executor.cc                  the CPU, through the one factory
//   test_executor_cuda_emulated.cc    the CUDA executor on the host emulation (CI)
//   test_executor_cuda.cc             the CUDA executor on GPU 0 (label gpu; every
//                                     test skips, saying why, without a usable GPU)
//   test_executor_cpu_tp.cc           the CPU twin of tensor parallelism, at
//                                     KVFLEET_TEST_TENSOR_PARALLEL ranks (2 unless set)
//   test_executor_cuda_emulated_tp.cc the same ranks on the emulation, a device each
//
//   std::unique_ptr<engine::ModelExecutor> ex = testing::NewTinyExecutor(*model, /*num_blocks=*/64, /*block_size=*/4);
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/executor/model_executor.h"
#include "model/model.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::testing {

// Batch limits roomy enough for any scheduler a tiny-model test uses (a tiny
// vocabulary keeps even 4096 logits rows small).
inline constexpr engine::ExecutorLimits kRoomyLimits{.max_batch_tokens = 4096, .max_batch_chunks = 256};

// This binary's backend, e.g. "cpu", "cuda-emulated", "cuda", "cpu-tp3".
std::string TestBackendName();

// The tensor-parallel degree this binary's executors run at (1 but for the twin).
int32_t TestTensorParallel();

// An executor of this binary's backend (options.device is replaced by it).
// CHECK-fails (the test cannot go on) when it cannot be made.
std::unique_ptr<engine::ModelExecutor> NewExecutor(const model::Model& model, engine::ExecutorOptions options);

// The pages that hold as much as `blocks` blocks of every layer: blocks ×
// the model's page groups when window pages are freed
// (model/arch/kv_page_groups.h), so a test's block counts keep their memory.
int64_t PagesForBlocks(const model::Model& model, int64_t blocks, bool free_window_blocks = true);

// With kRoomyLimits; num_blocks in blocks of every layer (PagesForBlocks).
std::unique_ptr<engine::ModelExecutor> NewTinyExecutor(const model::Model& model, int64_t num_blocks,
                                                       int64_t block_size, int threads = 2);

// int8_rotated_scaled's key channel scales for tests: a fixed spread of
// exponents 0-3 over every (layer, KV head, channel) of the model; null for
// another format.
std::shared_ptr<const engine::KeyChannelScales> TestKeyScales(const model::Model& model, kernels::KvCacheDtype kv);

// The shape the exactness suites run on: `base` (a tiny model) on the CPU
// and the emulation; SmolLM2-135M's layers, heads, widths and 49,152-token
// vocabulary on a GPU, keeping base's type, seed and context length.
// KVFLEET_TEST_SHAPE=tiny or =smollm2 overrides either default. Under
// tensor parallelism, widened until it splits (TensorParallelShape).
tools::TinyModelOptions TestModelShape(tools::TinyModelOptions base);

// base with enough KV heads, and head and feed-forward widths of whole
// blocks of its type, to split across `degree` ranks
// (model/arch/shard_plan.h); base itself at degree 1 or when it already does.
tools::TinyModelOptions TensorParallelShape(tools::TinyModelOptions base, int32_t degree);

// The tensor-parallel backends' degree: KVFLEET_TEST_TENSOR_PARALLEL, 2
// unless it says more.
int32_t TensorParallelFromEnvironment();

// The SmolLM2-135M shape over `base`, and the choice from the environment.
tools::TinyModelOptions SmolLm2Shape(tools::TinyModelOptions base);
tools::TinyModelOptions ShapeFromEnvironment(const tools::TinyModelOptions& base, bool smollm2_by_default);

}  // namespace kvfleet::testing
