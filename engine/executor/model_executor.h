// The executor backend interface: runs the model's forward pass for one
// ForwardBatch over a paged KV cache that the executor owns physically (host
// memory for the CPU backend, device memory for CUDA). Which blocks a
// sequence uses is decided by the caller (the block pool); the executor only
// reads and writes the blocks it is told to.
//
// Life cycle: CreateExecutor (executor_factory.h) loads the weights and sizes
// every scratch buffer from ExecutorLimits; the KV cache comes then or later
// (AllocateKvCache), once the memory planner knows what is left. Forward
// allocates nothing: a step's cost is its kernels, and a decode step can be
// captured in a CUDA graph.
//
// Thread-safety: one thread at a time (the engine thread).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> ex, CreateExecutor(model, options));
//   RETURN_IF_ERROR(ex->AllocateKvCache(plan.num_blocks));
//   ASSIGN_OR_RETURN(ForwardOutput out, ex->Forward(batch));
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/ids.h"
#include "engine/executor/executor_options.h"
#include "engine/executor/forward_batch.h"
#include "model/arch/kv_page_groups.h"
#include "model/arch/model_config.h"

namespace kvfleet::model {
class Model;
}  // namespace kvfleet::model

namespace kvfleet::model {
class DraftHeads;
struct LoraAdapter;
}  // namespace kvfleet::model

namespace kvfleet::engine {

// Bytes an executor holds on its device, by purpose (the memory plan's rows).
struct ExecutorMemory {
  int64_t weight_bytes = 0;
  int64_t scratch_bytes = 0;  // activations, logits, batch staging, tables
  int64_t kv_cache_bytes = 0;
  // Room for options.lora.max_loras adapters of options.lora.max_rank on
  // every projection (what resident adapters may take at most).
  int64_t lora_bytes = 0;
  // Of weight_bytes and scratch_bytes, what is already written, so that a
  // free figure taken now (DeviceFreeMemory) has it out already: the CPU's
  // packed weights for 8-bit activations.
  int64_t resident_bytes = 0;
};

// What the executor's device has free now, for the memory plan.
struct DeviceFreeMemory {
  int64_t free_bytes = 0;
  // True when free_bytes already excludes this executor's own allocations
  // (cudaMemGetInfo after they were made). The CPU's figure does not: the
  // mapped weights and untouched scratch are not resident yet, so the
  // planner subtracts them.
  bool excludes_own_allocations = false;
};

struct ExecutorInfo {
  Device device;
  // Backend and kernel version, e.g. "cpu/1" or "cuda-sm90/1": greedy
  // tokens are identical between executors with the same identity, close
  // but not identical across identities. The router resumes a broken
  // stream only on a worker with the same one.
  std::string numerics;
  int64_t vocab_size = 0;
  int64_t context_length = 0;
  int64_t block_size = 0;
  int64_t num_blocks = 0;  // 0 until the KV cache is allocated
  int64_t num_layers = 0;
  int64_t weight_bytes = 0;        // what a forward pass reads: the cost of a step relative to another model's
  int64_t kv_bytes_per_token = 0;  // 2 × layers × kv_heads × head_dim × 2 bytes (float16 cache)
  // How layers share pages (one group unless window blocks are freed). A
  // "block" of the cache is a page: num_blocks pages, each one block of
  // tokens for kv_groups.layers_per_page layers.
  model::KvPageGroups kv_groups;
  // One page's K and V over its layers, scales and padding included: the
  // unit the pool hands out and a lower KV tier keeps (CopyKvBlockOut's size).
  int64_t kv_block_bytes = 0;
  // Ranks the model is split across (model/arch/shard_plan.h); 1: whole.
  // A block holds every rank's share of its KV heads.
  int32_t tensor_parallel = 1;
  // LoRA adapters it can hold at once (options.lora.max_loras) and the
  // largest rank each slot takes.
  int32_t lora_slots = 0;
  int32_t max_lora_rank = 0;
  ExecutorLimits limits;  // resolved: max_logits_rows is set
};

// Pages an executor allocates for a pool of num_blocks: one more, zeroed,
// when window pages are freed: the null page, id num_blocks. A freed table
// entry names it, so a kernel that reads a whole partition before a window
// reads finite zeros there (and masks them) instead of another request's page.
inline int64_t KvPagesAllocated(const ExecutorInfo& info, int64_t num_blocks) {
  return num_blocks + (info.kv_groups.frees_window_blocks() ? 1 : 0);
}

// A batch builder for an executor's cache: its block size, page groups and
// null page (above).
inline ForwardBatchBuilder BatchBuilderFor(const ExecutorInfo& info) {
  const int32_t bs = static_cast<int32_t>(info.block_size);
  if (!info.kv_groups.frees_window_blocks()) return ForwardBatchBuilder(bs);
  const int32_t null_page = static_cast<int32_t>(KvPagesAllocated(info, info.num_blocks) - 1);
  return ForwardBatchBuilder(bs, info.kv_groups.num_groups(), null_page);
}

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;
  virtual const ExecutorInfo& info() const = 0;
  virtual ExecutorMemory memory() const = 0;
  // CPU: min(MemAvailable, cgroup limit − usage); CUDA: cudaMemGetInfo.
  virtual absl::StatusOr<DeviceFreeMemory> FreeMemory() const = 0;
  // Once. INVALID_ARGUMENT for num_blocks < 1, FAILED_PRECONDITION when a
  // cache exists, RESOURCE_EXHAUSTED when the device cannot hold it.
  virtual absl::Status AllocateKvCache(int64_t num_blocks) = 0;
  // INVALID_ARGUMENT for a batch ForwardBatch::Validate refuses or one past
  // info().limits; FAILED_PRECONDITION before AllocateKvCache. The output
  // views the executor's own buffer until the next call.
  virtual absl::StatusOr<ForwardOutput> Forward(const ForwardBatch& batch) = 0;
  // Not OK once the executor can run no step again: a tensor-parallel rank
  // failed mid-step, so its ranks' caches disagree. Every later Forward
  // fails with it; the worker exits. Thread-safe.
  virtual absl::Status Fault() const { return absl::OkStatus(); }

  // A block's KV, every layer's K then V in layer order, into `out` (exactly
  // info().kv_block_bytes bytes), and back: what the host and disk tiers
  // store. Bit-exact both ways. Between steps only (never during Forward).
  // UNIMPLEMENTED on executors without lower-tier support.
  virtual absl::Status CopyKvBlockOut(BlockId block, std::span<uint8_t> out);
  virtual absl::Status CopyKvBlockIn(BlockId block, std::span<const uint8_t> in);
  // Moves K/V between cache slots of every layer: from[i] → to[i] (page ×
  // block_size + slot), with the result of doing them one after another.
  // Tree verification uses it to put an accepted path where plain decoding
  // would have written it. Between steps only. UNIMPLEMENTED on executors
  // without it (the engine then recomputes those tokens instead).
  virtual absl::Status MoveKvSlots(std::span<const int64_t> from, std::span<const int64_t> to);
  // Host memory for a lower KV tier, `bytes` long: page-locked on a GPU
  // (copies to and from it are DMA), plain on the CPU. Null when there is
  // not that much.
  virtual std::shared_ptr<uint8_t> AllocateHostMemory(size_t bytes);

  // Draft heads (model/arch/draft_heads_forward.h) run where this
  // executor's kernels run. LoadDraftHeads once (a GPU copies the weights to
  // the device; the executor keeps `heads` alive). RunDraftHeads between
  // steps, on `rows` hidden states a Forward returned (ForwardOutput::hidden
  // rows, on the host): the first `num_heads` heads' logits [num_heads,
  // rows, draft vocabulary], in a host buffer the executor owns until the
  // next call. UNIMPLEMENTED on executors without them.
  virtual absl::Status LoadDraftHeads(std::shared_ptr<const model::DraftHeads> heads);
  virtual absl::StatusOr<std::span<const float>> RunDraftHeads(std::span<const float> hidden, int64_t rows,
                                                               int32_t num_heads);

  // LoRA adapters (model/lora/): up to options.lora.max_loras resident, each
  // in a slot that a batch's chunks name (ForwardBatch::chunk_lora).
  // LoadLora puts `adapter` in `slot`, replacing what was there; the
  // executor keeps it alive (a GPU copies it to the device). INVALID_ARGUMENT
  // for a slot out of range, a rank over options.lora.max_rank, or pairs
  // that do not fit the model's weights; FAILED_PRECONDITION when the
  // executor was made without slots. Between steps only. UNIMPLEMENTED on
  // executors without adapters.
  virtual absl::Status LoadLora(int32_t slot, std::shared_ptr<const model::LoraAdapter> adapter);
  virtual absl::Status UnloadLora(int32_t slot);
};

// Bytes one adapter of `rank` on every projection of the model takes in
// float32: what a LoRA slot reserves.
int64_t LoraSlotBytes(const model::ModelConfig& config, int32_t rank);

// CreateExecutor's signature (executor_factory.h), for libraries that make
// executors (the draft model's) without linking any backend themselves.
using ExecutorFactory =
    std::function<absl::StatusOr<std::unique_ptr<ModelExecutor>>(const model::Model&, const ExecutorOptions&)>;

}  // namespace kvfleet::engine
