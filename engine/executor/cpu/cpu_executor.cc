#include "engine/executor/cpu/cpu_executor.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/host_memory.h"
#include "common/status_macros.h"
#include "engine/executor/backend_common.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_q8.h"
#include "kernels/cpu/paged_attention.h"
#include "model/arch/draft_heads_forward.h"

namespace kvfleet::engine {

absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(const model::Model& model,
                                                                 const ExecutorOptions& options, CpuRank rank) {
  RETURN_IF_ERROR(options.Validate());
  if (options.device.kind != DeviceKind::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat("the CPU executor cannot run on ", options.device.ToString()));
  }
  ASSIGN_OR_RETURN(std::vector<float> key_scales, KeyScaleMultipliers(model.config(), options));
  std::unique_ptr<CpuExecutor> ex(new CpuExecutor(model, options, rank));
  ex->key_scales_ = std::move(key_scales);
  if (ex->forward_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no forward pass for architecture '", model.config().architecture,
                                                   "' (load models through model::Model::Load)"));
  }
  if (options.cpu_activations == CpuActivations::kQ8) {
    ASSIGN_OR_RETURN(Q8PackedWeights packed, Q8PackedWeights::Pack(model, ex->pool_));
    ex->q8_weights_ = std::make_unique<Q8PackedWeights>(std::move(packed));
    ex->ops_config_.q8_weights = ex->q8_weights_.get();
  }
  if (options.num_blocks > 0) RETURN_IF_ERROR(ex->AllocateKvCache(options.num_blocks));
  return ex;
}

std::string CpuNumericsFor(CpuActivations activations, kernels::KvCacheDtype kv) {
  return std::string(activations == CpuActivations::kQ8 ? kCpuQ8Numerics : kCpuNumerics) + KvNumericsSuffix(kv);
}

std::string CpuNumericsFor(const ExecutorOptions& options) {
  return CpuNumericsFor(options.cpu_activations, options.kv_cache_dtype) + KeyScalesDigestSuffix(options);
}

CpuExecutor::CpuExecutor(const model::Model& model, const ExecutorOptions& options, CpuRank rank)
    : model_(model),
      config_(model.config()),
      forward_(model::ForwardFor<CpuOps>(model.config().architecture)),
      options_(options),
      info_(ExecutorInfoFor(model, options)),
      own_pool_(rank.shared_pool == nullptr ? std::make_unique<ThreadPool>(options.num_threads) : nullptr),
      pool_(rank.shared_pool != nullptr ? *rank.shared_pool : *own_pool_),
      ops_config_(CpuOps::Config::For(model.config())),
      lora_slots_(options.lora.max_loras, model.config().num_layers, options.limits.max_batch_chunks) {
  info_.numerics = CpuNumericsFor(options);
  ops_config_.collective = rank.collective;

  const int64_t T = info_.limits.max_batch_tokens;
  const model::ActivationSizes sizes = model::ActivationSizes::For(config_, T, info_.limits.max_logits_rows);
  scratch_floats_ = sizes.total() + ops_config_.RopeScratchFloats(T);
  scratch_.reset(new float[static_cast<size_t>(scratch_floats_)]);
  activations_ = sizes.Carve(scratch_.get());
  rope_scratch_ = scratch_.get() + sizes.total();
  // The kernels' per-thread scratch too, on every thread, once.
  const int64_t max_k = std::max({config_.hidden_size, config_.ffn_size, config_.num_heads * config_.head_dim});
  if (options.cpu_activations == CpuActivations::kQ8) {
    q8_scratch_blocks_ = std::max<int64_t>(T, info_.limits.logits_rows()) * (max_k / 32);
    q8_scratch_.reset(new kernels::BlockQ8A[static_cast<size_t>(q8_scratch_blocks_)]);
    ops_config_.q8_scratch = q8_scratch_.get();
  }
  max_k_ = max_k;
  pool_.RunOnEachThread([this] { ReserveThreadScratch(); });
}

void CpuExecutor::ReserveCallingThreadScratch() const {
  thread_local const CpuExecutor* reserved_for = nullptr;
  if (reserved_for != this) {
    ReserveThreadScratch();
    reserved_for = this;
  }
}

void CpuExecutor::ReserveThreadScratch() const {
  kernels::ReserveMatMulScratch(max_k_);
  kernels::ReservePagedAttentionScratch(config_.context_length, config_.num_heads / config_.num_kv_heads,
                                        config_.head_dim, options_.block_size);
}

ExecutorMemory CpuExecutor::memory() const {
  // The packed copy of the matmul weights replaces their mapped pages,
  // except for a tied embedding table's, which the lookup reads again.
  const int64_t packing =
      q8_weights_ ? q8_weights_->bytes() - q8_weights_->source_bytes() + q8_weights_->reread_bytes() : 0;
  return {.weight_bytes = info_.weight_bytes + packing,
          .scratch_bytes = scratch_floats_ * static_cast<int64_t>(sizeof(float)) +
                           q8_scratch_blocks_ * static_cast<int64_t>(sizeof(kernels::BlockQ8A)),
          .kv_cache_bytes = KvPagesAllocated(info_, info_.num_blocks) * info_.kv_block_bytes,
          .lora_bytes = options_.lora.max_loras * LoraSlotBytes(config_, options_.lora.max_rank),
          .resident_bytes = q8_weights_ ? q8_weights_->bytes() : 0};
}

absl::StatusOr<DeviceFreeMemory> CpuExecutor::FreeMemory() const {
  ASSIGN_OR_RETURN(int64_t free, HostFreeMemoryBytes());
  return DeviceFreeMemory{.free_bytes = free, .excludes_own_allocations = false};
}

absl::Status CpuExecutor::AllocateKvCache(int64_t num_blocks) {
  if (num_blocks < 1) return absl::InvalidArgumentError("the KV cache needs at least one block");
  if (info_.num_blocks > 0) return absl::FailedPreconditionError("the KV cache is already allocated");
  const int64_t pages = KvPagesAllocated(info_, num_blocks);
  const size_t per_layer = static_cast<size_t>(KvLayoutFor(config_, options_, pages).BytesPerLayer());
  const size_t page_piece = static_cast<size_t>(KvLayoutFor(config_, options_, 1).BytesPerLayer());
  for (int64_t l = 0; l < info_.kv_groups.layers_per_page; ++l) {
    // Uninitialised: a slot is written before any token reads it, and the
    // pages are only committed as blocks are used. The null page, past the
    // pool's, is zeroed.
    k_cache_.emplace_back(new (std::nothrow) uint8_t[per_layer]);
    v_cache_.emplace_back(new (std::nothrow) uint8_t[per_layer]);
    if (k_cache_.back() == nullptr || v_cache_.back() == nullptr) {
      k_cache_.clear();
      v_cache_.clear();
      return absl::ResourceExhaustedError(absl::StrCat("no host memory for a KV cache of ", num_blocks, " blocks"));
    }
    k_layers_.push_back(k_cache_.back().get());
    v_layers_.push_back(v_cache_.back().get());
    if (pages > num_blocks) {
      std::memset(k_layers_.back() + num_blocks * page_piece, 0, page_piece);
      std::memset(v_layers_.back() + num_blocks * page_piece, 0, page_piece);
    }
  }
  info_.num_blocks = num_blocks;
  return absl::OkStatus();
}

absl::Status CpuExecutor::LoadDraftHeads(std::shared_ptr<const model::DraftHeads> heads) {
  if (heads == nullptr || heads->hidden_size() != config_.hidden_size) {
    return absl::InvalidArgumentError("draft heads of another hidden size than the model's");
  }
  draft_heads_ = std::move(heads);
  return absl::OkStatus();
}

absl::StatusOr<std::span<const float>> CpuExecutor::RunDraftHeads(std::span<const float> hidden, int64_t rows,
                                                                  int32_t num_heads) {
  RETURN_IF_ERROR(CheckDraftHeadsCall(draft_heads_.get(), hidden, rows, num_heads));
  const model::DraftHeadWeights& w = draft_heads_->weights();
  heads_states_.resize(static_cast<size_t>(num_heads * rows * w.hidden_size()));
  heads_logits_.resize(static_cast<size_t>(num_heads * rows * w.vocab_size()));
  ReserveCallingThreadScratch();
  CpuOps ops(pool_, ops_config_, {}, rope_scratch_);
  model::DraftHeadsForward(ops, w, num_heads, rows, hidden.data(), heads_states_.data(), heads_logits_.data());
  return std::span<const float>(heads_logits_);
}

absl::Status CpuExecutor::LoadLora(int32_t slot, std::shared_ptr<const model::LoraAdapter> adapter) {
  if (lora_slots_.num_slots() == 0) {
    return absl::FailedPreconditionError("this executor holds no LoRA adapters (start it with --max-loras N)");
  }
  RETURN_IF_ERROR(lora_slots_.CheckSlot(slot));
  RETURN_IF_ERROR(LoraSlots::CheckFits(*adapter, model_.weights(), options_.lora.max_rank));
  lora_slots_.Set(slot, ResidentLora::InPlace(std::move(adapter)));
  return absl::OkStatus();
}

absl::Status CpuExecutor::UnloadLora(int32_t slot) {
  RETURN_IF_ERROR(lora_slots_.CheckSlot(slot));
  lora_slots_.Clear(slot);
  return absl::OkStatus();
}

absl::StatusOr<ForwardOutput> CpuExecutor::Forward(const ForwardBatch& batch) {
  if (info_.num_blocks == 0) return absl::FailedPreconditionError("Forward before AllocateKvCache");
  // The calling thread runs kernel chunks too, and it need not be the one
  // that created the executor (a worker's engine thread is not): its
  // scratch is sized on its first step, not grown by later ones.
  ReserveCallingThreadScratch();
  const int64_t pages = KvPagesAllocated(info_, info_.num_blocks);
  RETURN_IF_ERROR(
      batch.Validate(info_.vocab_size, info_.context_length, pages, info_.num_layers, info_.kv_groups.num_groups()));
  RETURN_IF_ERROR(CheckBatchLimits(batch, info_.limits));
  const KvCacheView kv{.layout = KvLayoutFor(config_, options_, pages),
                       .k = k_layers_.data(),
                       .v = v_layers_.data(),
                       .groups = &info_.kv_groups,
                       .key_scales = key_scales_.empty() ? nullptr : key_scales_.data()};
  ASSIGN_OR_RETURN(const int32_t lora_segments, lora_slots_.BuildSegments(batch));
  CpuOps ops(
      pool_, ops_config_,
      {.arrays = HostArrays(batch),
       .kv = kv,
       .num_tokens = batch.num_tokens(),
       .lora = {.table = lora_slots_.table().data(), .count = lora_segments, .rows = lora_slots_.segment_rows()}},
      rope_scratch_);
  ops.Prepare();
  forward_(ops, config_, model_.weights(), StepOf(batch, config_), activations_);
  return ForwardOutput{.vocab_size = info_.vocab_size,
                       .num_rows = batch.num_logits_rows(),
                       .logits = activations_.logits,
                       .hidden_size = config_.hidden_size,
                       .hidden = activations_.logits_in};
}

// A page is one contiguous piece of each of its layers' K and V (the
// layout's regions of its kv heads), so a copy is 2 × layers_per_page memcpys.
absl::Status CpuExecutor::CopyKvBlockOut(BlockId block, std::span<uint8_t> out) {
  RETURN_IF_ERROR(CheckKvBlockCopy(info_, block, out.size()));
  const kernels::KvCacheLayout one = KvLayoutFor(config_, options_, 1);
  const size_t piece = static_cast<size_t>(one.BytesPerLayer());
  const size_t at = static_cast<size_t>(block.value()) * piece;
  uint8_t* dst = out.data();
  for (size_t l = 0; l < k_layers_.size(); ++l) {
    std::memcpy(dst, k_layers_[l] + at, piece);
    std::memcpy(dst + piece, v_layers_[l] + at, piece);
    dst += 2 * piece;
  }
  return absl::OkStatus();
}

absl::Status CpuExecutor::CopyKvBlockIn(BlockId block, std::span<const uint8_t> in) {
  RETURN_IF_ERROR(CheckKvBlockCopy(info_, block, in.size()));
  const kernels::KvCacheLayout one = KvLayoutFor(config_, options_, 1);
  const size_t piece = static_cast<size_t>(one.BytesPerLayer());
  const size_t at = static_cast<size_t>(block.value()) * piece;
  const uint8_t* src = in.data();
  for (size_t l = 0; l < k_layers_.size(); ++l) {
    std::memcpy(k_layers_[l] + at, src, piece);
    std::memcpy(v_layers_[l] + at, src + piece, piece);
    src += 2 * piece;
  }
  return absl::OkStatus();
}

absl::Status CpuExecutor::MoveKvSlots(std::span<const int64_t> from, std::span<const int64_t> to) {
  RETURN_IF_ERROR(CheckKvMoves(info_, from, to));
  const kernels::KvCacheLayout layout = KvLayoutFor(config_, options_, KvPagesAllocated(info_, info_.num_blocks));
  for (size_t l = 0; l < k_layers_.size(); ++l) {
    kernels::MoveKvRows(layout, from, to, k_layers_[l]);
    kernels::MoveKvRows(layout, from, to, v_layers_[l]);
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::engine
