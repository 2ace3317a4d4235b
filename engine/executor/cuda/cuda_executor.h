// The CUDA backend of ModelExecutor: the model's architecture's forward
// pass (model/arch/forward.h) over CudaOps (kernels/cuda) on one GPU and
// one stream.
//
// Owns, in device memory (plain cudaMalloc, never managed memory): every
// weight tensor in its storage type (dequantized in the kernels as read),
// the RoPE cos/sin table of every position (one per RoPE configuration), every activation buffer and the
// attention workspace (sized once from the options' limits), and the KV
// cache (per layer, K and V float16 [num_blocks, kv_heads, block_size,
// head_dim], allocated by AllocateKvCache). In page-locked host memory: the
// batch's staging buffer (one copy to the device per step) and the logits
// rows (one copy back per step; the host sampler stays the reference).
// Borrows the model, which must outlive it. Create it through CreateExecutor
// (executor_factory.h).
//
// The same source builds twice: against the CUDA runtime (this backend) and
// against the host emulation (tests in CI), whose numerics identity differs.
//
// Thread-safety: one thread at a time; any thread (the device is made
// current on every call).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/executor/cuda/cuda_ops.h"
#include "engine/executor/lora_slots.h"
#include "engine/executor/model_executor.h"
#include "kernels/cuda/device_buffer.h"
#include "model/arch/draft_heads_forward.h"
#include "model/arch/forward.h"
#include "model/model.h"

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

// The CUDA kernels' arithmetic version, part of the numerics identity
// ("cuda-sm90/1"): bump it whenever a kernel's reduction order changes.
inline constexpr int kCudaKernelVersion = 1;

class CudaExecutor : public ModelExecutor {
 public:
  // options.device must be a GPU this process can use. Errors name the
  // problem: no such GPU, an unsupported shape, not enough device memory.
  // `collective`: a tensor-parallel rank's side of its replica's
  // collectives (cuda_ranks.h; the host emulation's only, for now).
  static absl::StatusOr<std::unique_ptr<CudaExecutor>> Create(const model::Model& model, const ExecutorOptions& options,
                                                              Collective* collective = nullptr);
  // The numerics identity an executor of these options on its device reports.
  static absl::StatusOr<std::string> NumericsFor(const ExecutorOptions& options);
  static int DeviceCount(std::string* why_none);
  ~CudaExecutor() override;

  const ExecutorInfo& info() const override { return info_; }
  ExecutorMemory memory() const override;
  absl::StatusOr<DeviceFreeMemory> FreeMemory() const override;
  absl::Status AllocateKvCache(int64_t num_blocks) override;
  absl::StatusOr<ForwardOutput> Forward(const ForwardBatch& batch) override;
  absl::Status CopyKvBlockOut(BlockId block, std::span<uint8_t> out) override;
  absl::Status CopyKvBlockIn(BlockId block, std::span<const uint8_t> in) override;
  absl::Status MoveKvSlots(std::span<const int64_t> from, std::span<const int64_t> to) override;
  std::shared_ptr<uint8_t> AllocateHostMemory(size_t bytes) override;
  absl::Status LoadDraftHeads(std::shared_ptr<const model::DraftHeads> heads) override;
  absl::StatusOr<std::span<const float>> RunDraftHeads(std::span<const float> hidden, int64_t rows,
                                                       int32_t num_heads) override;
  absl::Status LoadLora(int32_t slot, std::shared_ptr<const model::LoraAdapter> adapter) override;
  absl::Status UnloadLora(int32_t slot) override;

 private:
  // Where each batch array sits in the staging buffer (and its device twin).
  struct BatchLayout {
    size_t token_ids = 0, positions = 0, token_chunk = 0, kv_slots = 0, block_table = 0, logits_tokens = 0,
           tree_masks = 0, end = 0;
  };

  CudaExecutor(const model::Model& model, const ExecutorOptions& options);
  absl::Status Init();
  absl::Status UploadWeights();
  absl::Status UploadRopeTables();
  absl::Status UploadKeyScales();
  absl::Status AllocateScratch();
  absl::Status AllocateLoraSlots();
  BatchLayout LayoutFor(int64_t tokens, int64_t chunks, int64_t width, int64_t logits_rows, int64_t groups) const;
  absl::StatusOr<BatchArrays> StageBatch(const ForwardBatch& batch);

  const model::ModelConfig& config_;  // the model's, which outlives the executor
  model::ForwardFn<CudaOps> forward_;
  ExecutorOptions options_;
  ExecutorInfo info_;
  ::kvfleet::cuda::Stream stream_ = nullptr;

  ::kvfleet::cuda::DeviceBuffer weights_;
  model::DecoderWeights device_weights_;  // the model's views, pointing into weights_
  int64_t weight_bytes_ = 0;
  ::kvfleet::cuda::DeviceBuffer key_scales_;   // int8_rotated_scaled: KvCacheView::key_scales
  ::kvfleet::cuda::DeviceBuffer rope_tables_;  // per RoPE configuration: cos [context, rot/2], then sin
  CudaOps::Config ops_config_;
  ::kvfleet::cuda::DeviceBuffer activation_buffer_;
  model::Activations activations_;
  ::kvfleet::cuda::PinnedHostBuffer batch_staging_;
  ::kvfleet::cuda::DeviceBuffer batch_device_;
  ::kvfleet::cuda::DeviceBuffer attention_buffer_;
  CudaAttentionWorkspace attention_;
  ::kvfleet::cuda::PinnedHostBuffer logits_host_;
  ::kvfleet::cuda::PinnedHostBuffer hidden_host_;  // the output head's input rows, for draft heads
  // Draft heads: their weights on the device (one allocation), and room
  // for `heads_rows_` hidden rows, every head's states and logits.
  std::shared_ptr<const model::DraftHeads> draft_heads_;
  ::kvfleet::cuda::DeviceBuffer heads_weights_;
  model::DraftHeadWeights device_heads_;
  int64_t heads_rows_ = 0;
  ::kvfleet::cuda::DeviceBuffer heads_scratch_;  // hidden [rows, H], states [K, rows, H], logits [K, rows, V]
  ::kvfleet::cuda::PinnedHostBuffer heads_logits_host_;
  absl::Status ReserveDraftHeadRows(int64_t rows);
  int64_t scratch_bytes_ = 0;
  std::vector<::kvfleet::cuda::DeviceBuffer> k_cache_, v_cache_;
  std::vector<uint8_t*> k_layers_, v_layers_;
  // LoRA: each slot's pairs in its own region of lora_weights_ (room for
  // every projection at the largest rank), and the step's segment table.
  LoraSlots lora_slots_;
  ::kvfleet::cuda::DeviceBuffer lora_weights_;
  int64_t lora_slot_bytes_ = 0;
  ::kvfleet::cuda::DeviceBuffer lora_table_;
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
