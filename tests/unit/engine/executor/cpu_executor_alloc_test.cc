// The executor contract's "no allocation in a step": once warm, Forward on
// the CPU backend allocates nothing — every buffer was sized at creation
// (and the kernels' per-thread scratch has reached its size). This binary
// counts the global operator new, so it stands alone.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>
#include <tuple>

#include "engine/executor/cpu/cpu_executor.h"
#include "engine/executor/cpu/cpu_ranks.h"
#include "engine/executor/tensor_parallel_executor.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_lora.h"
#include "tools/tiny_model/tiny_model.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};

void* CountedAlloc(size_t n, size_t align = 0) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  const size_t size = n == 0 ? 1 : n;
  if (void* p = align == 0 ? std::malloc(size) : std::aligned_alloc(align, (size + align - 1) / align * align))
    return p;
  throw std::bad_alloc();
}
}  // namespace

// Every replaceable form, so nothing allocated by one pair is freed by
// another (AddressSanitizer reports such a mismatch).
void* operator new(size_t n) { return CountedAlloc(n); }
void* operator new[](size_t n) { return CountedAlloc(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return std::malloc(n == 0 ? 1 : n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return std::malloc(n == 0 ? 1 : n); }
void* operator new(size_t n, std::align_val_t a) { return CountedAlloc(n, static_cast<size_t>(a)); }
void* operator new[](size_t n, std::align_val_t a) { return CountedAlloc(n, static_cast<size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace kvfleet::engine {
namespace {

// An activation mode, whole or split across 2 tensor-parallel ranks (the
// rank threads, the collectives and the norm across ranks included).
class CpuExecutorAllocationTest : public ::testing::TestWithParam<std::tuple<CpuActivations, int32_t>> {};

TEST_P(CpuExecutorAllocationTest, AWarmForwardAllocatesNothing) {
  const auto [activations, degree] = GetParam();
  testing::TempDir dir;
  ASSERT_TRUE(tools::WriteTinyModel({.dtype = DType::kQ4_1, .seed = 2}, dir.Path("m.gguf")).ok());
  auto model = model::Model::Load(dir.Path("m.gguf"));
  ASSERT_TRUE(model.ok()) << model.status();
  // Created on another thread than the one that runs the steps, as a
  // worker does (it loads the model, then its engine thread runs it).
  absl::StatusOr<std::unique_ptr<ModelExecutor>> ex = absl::UnknownError("not created");
  std::thread([&] {
    const ExecutorOptions options{.num_blocks = 64,
                                  .block_size = 4,
                                  .num_threads = 2,
                                  .cpu_activations = activations,
                                  .tensor_parallel = degree,
                                  .lora = {.max_loras = 2, .max_rank = 4}};
    if (degree == 1) {
      auto whole = CpuExecutor::Create(**model, options);
      ex = whole.ok() ? absl::StatusOr<std::unique_ptr<ModelExecutor>>(std::move(*whole)) : whole.status();
    } else {
      auto split = TensorParallelExecutor::Create(**model, options, std::make_unique<CpuRanks>(2));
      ex = split.ok() ? absl::StatusOr<std::unique_ptr<ModelExecutor>>(std::move(*split)) : split.status();
    }
  }).join();
  ASSERT_TRUE(ex.ok()) << ex.status();
  // Each activation mode is its own arithmetic, so its own numerics identity.
  const std::string numerics = activations == CpuActivations::kQ8 ? kCpuQ8Numerics : kCpuNumerics;
  EXPECT_EQ((*ex)->info().numerics, degree == 1 ? numerics : numerics + "+tp2");

  std::vector<BlockId> table;
  for (int32_t b = 0; b < 32; ++b) table.emplace_back(b);
  std::vector<model::TokenId> prompt(100);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<model::TokenId>(i * 7 % 250);
  // The prefill runs under a LoRA adapter (its segment table and kernel
  // too must allocate nothing), the decode on the base model.
  ASSERT_TRUE((*ex)
                  ->LoadLora(1, std::make_shared<const model::LoraAdapter>(
                                    tools::RandomLoraAdapter(**model, {.name = "a", .rank = 4})))
                  .ok());
  ForwardBatchBuilder prefill(4), decode(4);
  prefill.AddChunk(prompt, 0, table, LogitsWanted::kAll, {}, /*lora_slot=*/1);
  const model::TokenId next[] = {5};
  decode.AddChunk(next, 100, table, LogitsWanted::kLast);
  const ForwardBatch& prefill_batch = prefill.Finish();
  const ForwardBatch& decode_batch = decode.Finish();
  // Warm with the small step first, so a buffer sized by the first step
  // would have to grow in the counted ones.
  ASSERT_TRUE((*ex)->Forward(decode_batch).ok());
  ASSERT_TRUE((*ex)->Forward(prefill_batch).ok());

  g_allocations = 0;
  g_counting = true;
  const bool ok = (*ex)->Forward(prefill_batch).ok() && (*ex)->Forward(decode_batch).ok();
  g_counting = false;
  ASSERT_TRUE(ok);
  EXPECT_EQ(g_allocations.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Activations, CpuExecutorAllocationTest,
                         ::testing::Combine(::testing::Values(CpuActivations::kF32, CpuActivations::kQ8),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == CpuActivations::kQ8 ? "q8" : "f32") +
                                  (std::get<1>(info.param) == 1 ? "" : "_tp2");
                         });

}  // namespace
}  // namespace kvfleet::engine
