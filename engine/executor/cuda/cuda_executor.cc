#include "engine/executor/cuda/cuda_executor.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/common/rope_tables.h"
#include "kernels/cuda/paged_attention.h"
#include "model/arch/draft_heads_forward.h"

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

namespace cu = ::kvfleet::cuda;

constexpr size_t kAlign = 256;
// The attention workspace's budget for partial results; always at least one
// token's worth at the end of the context.
constexpr int64_t kAttentionWorkspaceBytes = int64_t{256} << 20;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

int CudaExecutor::DeviceCount(std::string* why_none) { return cu::DeviceCount(why_none); }

absl::StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::Create(const model::Model& model,
                                                                   const ExecutorOptions& options,
                                                                   Collective* collective) {
  RETURN_IF_ERROR(options.Validate());
  if (options.device.kind != DeviceKind::kCuda) {
    return absl::InvalidArgumentError(absl::StrCat("the CUDA executor cannot run on ", options.device.ToString()));
  }
  std::string why;
  const int count = cu::DeviceCount(&why);
  if (options.device.index >= count) {
    return absl::FailedPreconditionError(
        count == 0 ? absl::StrCat(options.device.ToString(), " asked for, but ", why, "; use --device cpu")
                   : absl::StrCat(options.device.ToString(), " asked for, but this machine has ", count,
                                  " GPU(s) (cuda:0 .. cuda:", count - 1, ")"));
  }
  const model::ModelConfig& c = model.config();
  if (!kernels::cuda::PagedAttentionSupports(c.head_dim, c.num_heads, c.num_kv_heads, &why)) {
    return absl::InvalidArgumentError(absl::StrCat("this model (head_dim ", c.head_dim, ", ", c.num_heads, " heads of ",
                                                   c.num_kv_heads, " KV heads) cannot run on CUDA: ", why,
                                                   "; use --device cpu"));
  }
  if (c.hidden_size % 32 != 0 || c.ffn_size % 32 != 0) {
    return absl::InvalidArgumentError("the CUDA matmul needs hidden and feed-forward sizes that are multiples of 32");
  }
  std::unique_ptr<CudaExecutor> ex(new CudaExecutor(model, options));
  ex->ops_config_.collective = collective;
  if (ex->forward_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no forward pass for architecture '", c.architecture,
                                                   "' (load models through model::Model::Load)"));
  }
  RETURN_IF_ERROR(ex->Init());
  if (options.num_blocks > 0) RETURN_IF_ERROR(ex->AllocateKvCache(options.num_blocks));
  return ex;
}

CudaExecutor::CudaExecutor(const model::Model& model, const ExecutorOptions& options)
    : config_(model.config()),
      forward_(model::ForwardFor<CudaOps>(model.config().architecture)),
      options_(options),
      info_(ExecutorInfoFor(model, options)),
      device_weights_(model.weights()),
      ops_config_(CudaOps::Config::For(model.config())),
      lora_slots_(options.lora.max_loras, model.config().num_layers, options.limits.max_batch_chunks) {}

CudaExecutor::~CudaExecutor() {
  if (stream_ != nullptr) {
    (void)cu::Synchronize(stream_);
    cu::DestroyStream(stream_);
  }
}

absl::StatusOr<std::string> CudaExecutor::NumericsFor(const ExecutorOptions& options) {
  ASSIGN_OR_RETURN(cu::DeviceProperties props, cu::GetDeviceProperties(options.device.index));
  const std::string kernels = cu::IsEmulated()
                                  ? absl::StrCat("cuda-emulated/", kCudaKernelVersion)
                                  : absl::StrCat("cuda-sm", props.major, props.minor, "/", kCudaKernelVersion);
  return kernels + KvNumericsSuffix(options.kv_cache_dtype) + KeyScalesDigestSuffix(options);
}

absl::Status CudaExecutor::Init() {
  RETURN_IF_ERROR(cu::SetDevice(options_.device.index));
  ASSIGN_OR_RETURN(cu::DeviceProperties props, cu::GetDeviceProperties(options_.device.index));
  ASSIGN_OR_RETURN(info_.numerics, NumericsFor(options_));
  ASSIGN_OR_RETURN(stream_, cu::CreateStream());
  RETURN_IF_ERROR(UploadWeights());
  RETURN_IF_ERROR(UploadRopeTables());
  RETURN_IF_ERROR(UploadKeyScales());
  RETURN_IF_ERROR(AllocateScratch());
  RETURN_IF_ERROR(AllocateLoraSlots());
  RETURN_IF_ERROR(cu::Synchronize(stream_));
  KVFLEET_LOG_INFO("CUDA executor on {} ({}, sm_{}{}, {} multiprocessors): weights {} MiB, scratch {} MiB",
                   options_.device.ToString(), props.name, props.major, props.minor, props.multiprocessors,
                   weight_bytes_ >> 20, scratch_bytes_ >> 20);
  return absl::OkStatus();
}

absl::Status CudaExecutor::UploadWeights() {
  // One allocation holds every tensor; a tensor shared by two roles (tied
  // embeddings) is copied once.
  struct Placed {
    size_t offset;
    int64_t bytes;
  };
  std::unordered_map<const void*, Placed> placed;
  size_t total = 0;
  device_weights_.ForEach([&](model::WeightView& w) {
    if (placed.emplace(w.data, Placed{total, w.bytes()}).second) total = AlignUp(total + w.bytes());
  });
  ASSIGN_OR_RETURN(weights_, cu::DeviceBuffer::Allocate(total));
  for (const auto& [host, where] : placed) {
    RETURN_IF_ERROR(
        cu::CopyToDevice(weights_.as<uint8_t>() + where.offset, host, static_cast<size_t>(where.bytes), stream_));
  }
  device_weights_.ForEach([&](model::WeightView& w) { w.data = weights_.as<uint8_t>() + placed.at(w.data).offset; });
  weight_bytes_ = static_cast<int64_t>(total);
  return absl::OkStatus();
}

absl::Status CudaExecutor::UploadKeyScales() {
  ASSIGN_OR_RETURN(const std::vector<float> scales, KeyScaleMultipliers(config_, options_));
  if (scales.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(key_scales_, cu::DeviceBuffer::Allocate(scales.size() * sizeof(float)));
  return cu::CopyToDevice(key_scales_.as<float>(), scales.data(), scales.size() * sizeof(float), stream_);
}

absl::Status CudaExecutor::UploadRopeTables() {
  // One table per RoPE configuration, of every position of the context,
  // from the one definition of the angles (the CPU backend computes the
  // same per batch).
  const int64_t positions = config_.context_length;
  std::vector<int32_t> all(static_cast<size_t>(positions));
  for (int64_t p = 0; p < positions; ++p) all[static_cast<size_t>(p)] = static_cast<int32_t>(p);
  std::vector<size_t> offsets;
  std::vector<float> tables;
  for (const model::RopeConfig& r : config_.ropes) {
    const int64_t half = r.dim / 2;
    offsets.push_back(tables.size());
    tables.resize(tables.size() + static_cast<size_t>(2 * positions * half));
    float* cos = tables.data() + offsets.back();
    kernels::RopeCosSin(RopeParamsOf(config_, r), all.data(), positions, cos, cos + positions * half);
  }
  ASSIGN_OR_RETURN(rope_tables_, cu::DeviceBuffer::Allocate(tables.size() * sizeof(float)));
  RETURN_IF_ERROR(cu::CopyToDevice(rope_tables_.get(), tables.data(), tables.size() * sizeof(float), stream_));
  // The copy is from pageable memory: it has left `tables` before it returns.
  for (size_t i = 0; i < offsets.size(); ++i) {
    const float* cos = rope_tables_.as<float>() + offsets[i];
    ops_config_.rope_cos.push_back(cos);
    ops_config_.rope_sin.push_back(cos + positions * (config_.ropes[i].dim / 2));
  }
  scratch_bytes_ += static_cast<int64_t>(rope_tables_.size());
  return absl::OkStatus();
}

CudaExecutor::BatchLayout CudaExecutor::LayoutFor(int64_t tokens, int64_t chunks, int64_t width, int64_t logits_rows,
                                                  int64_t groups) const {
  BatchLayout l;
  size_t at = 0;
  const auto take = [&at](size_t bytes) { return std::exchange(at, AlignUp(at + bytes)); };
  l.token_ids = take(tokens * 4);
  l.positions = take(tokens * 4);
  l.token_chunk = take(tokens * 4);
  l.kv_slots = take(groups * tokens * 8);
  l.block_table = take(groups * chunks * width * 4);
  l.logits_tokens = take(logits_rows * 4);
  l.tree_masks = take(tokens * 8);
  l.end = at;
  return l;
}

absl::Status CudaExecutor::AllocateScratch() {
  const ExecutorLimits& lim = info_.limits;
  const model::ActivationSizes sizes = model::ActivationSizes::For(config_, lim.max_batch_tokens, lim.max_logits_rows);
  ASSIGN_OR_RETURN(activation_buffer_, cu::DeviceBuffer::Allocate(static_cast<size_t>(sizes.total()) * sizeof(float)));
  activations_ = sizes.Carve(activation_buffer_.as<float>());

  const int64_t width = (config_.context_length + options_.block_size - 1) / options_.block_size;
  const BatchLayout batch =
      LayoutFor(lim.max_batch_tokens, lim.max_batch_chunks, width, lim.max_logits_rows, info_.kv_groups.num_groups());
  ASSIGN_OR_RETURN(batch_staging_, cu::PinnedHostBuffer::Allocate(batch.end));
  ASSIGN_OR_RETURN(batch_device_, cu::DeviceBuffer::Allocate(batch.end));

  attention_.item_capacity = CudaAttentionWorkspace::ItemsFor(lim.max_batch_tokens, config_.context_length);
  attention_.partial_capacity =
      CudaAttentionWorkspace::PartialsFor(config_, lim.max_batch_tokens, kAttentionWorkspaceBytes);
  const size_t items_bytes = AlignUp(attention_.item_capacity * sizeof(kernels::cuda::AttentionWorkItem));
  const size_t offsets_bytes = AlignUp(lim.max_batch_tokens * sizeof(int64_t));
  const size_t o_bytes = AlignUp(attention_.partial_capacity * config_.num_heads * config_.head_dim * sizeof(float));
  const size_t ml_bytes = AlignUp(attention_.partial_capacity * config_.num_heads * 2 * sizeof(float));
  ASSIGN_OR_RETURN(attention_buffer_, cu::DeviceBuffer::Allocate(items_bytes + offsets_bytes + o_bytes + ml_bytes));
  uint8_t* a = attention_buffer_.as<uint8_t>();
  attention_.items = reinterpret_cast<kernels::cuda::AttentionWorkItem*>(a);
  attention_.partial_offsets = reinterpret_cast<int64_t*>(a + items_bytes);
  attention_.partial_o = reinterpret_cast<float*>(a + items_bytes + offsets_bytes);
  attention_.partial_ml = reinterpret_cast<float*>(a + items_bytes + offsets_bytes + o_bytes);

  ASSIGN_OR_RETURN(logits_host_, cu::PinnedHostBuffer::Allocate(static_cast<size_t>(sizes.logits) * sizeof(float)));
  ASSIGN_OR_RETURN(hidden_host_, cu::PinnedHostBuffer::Allocate(static_cast<size_t>(sizes.logits_in) * sizeof(float)));
  scratch_bytes_ += static_cast<int64_t>(activation_buffer_.size() + batch_device_.size() + attention_buffer_.size());
  return absl::OkStatus();
}

absl::Status CudaExecutor::AllocateLoraSlots() {
  if (options_.lora.max_loras == 0) return absl::OkStatus();
  lora_slot_bytes_ = LoraSlotBytes(config_, options_.lora.max_rank);
  ASSIGN_OR_RETURN(lora_weights_, cu::DeviceBuffer::Allocate(static_cast<size_t>(lora_slot_bytes_) *
                                                             static_cast<size_t>(options_.lora.max_loras)));
  ASSIGN_OR_RETURN(lora_table_,
                   cu::DeviceBuffer::Allocate(static_cast<size_t>(config_.num_layers) * model::kProjections *
                                              info_.limits.max_batch_chunks * sizeof(kernels::LoraSegment)));
  return absl::OkStatus();
}

absl::Status CudaExecutor::LoadLora(int32_t slot, std::shared_ptr<const model::LoraAdapter> adapter) {
  if (lora_slots_.num_slots() == 0) {
    return absl::FailedPreconditionError("this executor holds no LoRA adapters (start it with --max-loras N)");
  }
  RETURN_IF_ERROR(lora_slots_.CheckSlot(slot));
  RETURN_IF_ERROR(LoraSlots::CheckFits(*adapter, device_weights_, options_.lora.max_rank));
  RETURN_IF_ERROR(cu::SetDevice(options_.device.index));
  // The pairs one after another in the slot's region (CheckFits bounds
  // them by what the region was sized for).
  lora_slots_.Clear(slot);
  float* at = reinterpret_cast<float*>(lora_weights_.as<uint8_t>() + slot * lora_slot_bytes_);
  ResidentLora placed{.adapter = adapter};
  placed.layers.resize(adapter->layers.size());
  for (size_t l = 0; l < adapter->layers.size(); ++l) {
    for (int p = 0; p < model::kProjections; ++p) {
      const std::optional<model::LoraPair>& pair = adapter->layers[l][static_cast<size_t>(p)];
      if (!pair.has_value()) continue;
      RETURN_IF_ERROR(cu::CopyToDevice(at, pair->a.data(), pair->a.size() * sizeof(float), stream_));
      RETURN_IF_ERROR(cu::CopyToDevice(at + pair->a.size(), pair->b.data(), pair->b.size() * sizeof(float), stream_));
      placed.layers[l][static_cast<size_t>(p)] = {.a = at, .b = at + pair->a.size()};
      at += pair->a.size() + pair->b.size();
    }
  }
  RETURN_IF_ERROR(cu::Synchronize(stream_));
  lora_slots_.Set(slot, std::move(placed));
  return absl::OkStatus();
}

absl::Status CudaExecutor::UnloadLora(int32_t slot) {
  RETURN_IF_ERROR(lora_slots_.CheckSlot(slot));
  lora_slots_.Clear(slot);
  return absl::OkStatus();
}

ExecutorMemory CudaExecutor::memory() const {
  return {.weight_bytes = weight_bytes_,
          .scratch_bytes = scratch_bytes_,
          .kv_cache_bytes = KvPagesAllocated(info_, info_.num_blocks) * info_.kv_block_bytes,
          .lora_bytes = static_cast<int64_t>(lora_weights_.size() + lora_table_.size())};
}

absl::StatusOr<DeviceFreeMemory> CudaExecutor::FreeMemory() const {
  RETURN_IF_ERROR(cu::SetDevice(options_.device.index));
  int64_t free = 0, total = 0;
  RETURN_IF_ERROR(cu::MemGetInfo(&free, &total));
  return DeviceFreeMemory{.free_bytes = free, .excludes_own_allocations = true};
}

absl::Status CudaExecutor::AllocateKvCache(int64_t num_blocks) {
  if (num_blocks < 1) return absl::InvalidArgumentError("the KV cache needs at least one block");
  if (info_.num_blocks > 0) return absl::FailedPreconditionError("the KV cache is already allocated");
  RETURN_IF_ERROR(cu::SetDevice(options_.device.index));
  const int64_t pages = KvPagesAllocated(info_, num_blocks);
  const size_t per_layer = static_cast<size_t>(KvLayoutFor(config_, options_, pages).BytesPerLayer());
  const size_t page_piece = static_cast<size_t>(KvLayoutFor(config_, options_, 1).BytesPerLayer());
  for (int64_t l = 0; l < info_.kv_groups.layers_per_page; ++l) {
    absl::StatusOr<cu::DeviceBuffer> k = cu::DeviceBuffer::Allocate(per_layer);
    absl::StatusOr<cu::DeviceBuffer> v = k.ok() ? cu::DeviceBuffer::Allocate(per_layer) : k.status();
    if (!v.ok()) {
      k_cache_.clear();
      v_cache_.clear();
      k_layers_.clear();
      v_layers_.clear();
      return absl::ResourceExhaustedError(absl::StrCat("no device memory for a KV cache of ", num_blocks, " blocks on ",
                                                       options_.device.ToString(), ": ", v.status().message()));
    }
    k_layers_.push_back(k->as<uint8_t>());
    v_layers_.push_back(v->as<uint8_t>());
    k_cache_.push_back(std::move(*k));
    v_cache_.push_back(std::move(*v));
    if (pages > num_blocks) {  // the null page (KvPagesAllocated) reads as zeros
      RETURN_IF_ERROR(cu::Memset(k_layers_.back() + num_blocks * page_piece, 0, page_piece, stream_));
      RETURN_IF_ERROR(cu::Memset(v_layers_.back() + num_blocks * page_piece, 0, page_piece, stream_));
    }
  }
  if (pages > num_blocks) RETURN_IF_ERROR(cu::Synchronize(stream_));
  info_.num_blocks = num_blocks;
  return absl::OkStatus();
}

absl::StatusOr<BatchArrays> CudaExecutor::StageBatch(const ForwardBatch& batch) {
  const BatchLayout l = LayoutFor(batch.num_tokens(), batch.num_chunks(), batch.max_blocks_per_chunk,
                                  batch.num_logits_rows(), batch.num_kv_groups);
  uint8_t* host = batch_staging_.as<uint8_t>();
  const auto put = [host](size_t offset, const auto& v) {
    if (!v.empty())
      std::memcpy(host + offset, v.data(), v.size() * sizeof(v[0]));  // an empty vector's data() may be null
  };
  put(l.token_ids, batch.token_ids);
  put(l.positions, batch.positions);
  put(l.token_chunk, batch.token_chunk);
  put(l.kv_slots, batch.kv_slots);
  put(l.block_table, batch.block_table);
  put(l.logits_tokens, batch.logits_tokens);
  put(l.tree_masks, batch.tree_masks);
  RETURN_IF_ERROR(cu::CopyToDevice(batch_device_.get(), host, l.end, stream_));
  uint8_t* dev = batch_device_.as<uint8_t>();
  return BatchArrays{
      .token_ids = reinterpret_cast<const int32_t*>(dev + l.token_ids),
      .logits_tokens = reinterpret_cast<const int32_t*>(dev + l.logits_tokens),
      .placement = {.positions = reinterpret_cast<const int32_t*>(dev + l.positions),
                    .token_chunk = reinterpret_cast<const int32_t*>(dev + l.token_chunk),
                    .block_table = reinterpret_cast<const int32_t*>(dev + l.block_table),
                    .table_width = batch.max_blocks_per_chunk,
                    .kv_slots = reinterpret_cast<const int64_t*>(dev + l.kv_slots),
                    .tree_masks =
                        batch.tree_masks.empty() ? nullptr : reinterpret_cast<const uint64_t*>(dev + l.tree_masks)},
      .group_table_stride = batch.group_table_size(),
      .group_slots_stride = batch.num_tokens()};
}

absl::StatusOr<ForwardOutput> CudaExecutor::Forward(const ForwardBatch& batch) {
  if (info_.num_blocks == 0) return absl::FailedPreconditionError("Forward before AllocateKvCache");
  const int64_t pages = KvPagesAllocated(info_, info_.num_blocks);
  RETURN_IF_ERROR(
      batch.Validate(info_.vocab_size, info_.context_length, pages, info_.num_layers, info_.kv_groups.num_groups()));
  RETURN_IF_ERROR(CheckBatchLimits(batch, info_.limits));
  RETURN_IF_ERROR(cu::SetDevice(options_.device.index));
  ASSIGN_OR_RETURN(BatchArrays arrays, StageBatch(batch));
  const KvCacheView kv{.layout = KvLayoutFor(config_, options_, pages),
                       .k = k_layers_.data(),
                       .v = v_layers_.data(),
                       .groups = &info_.kv_groups,
                       .key_scales = key_scales_.size() > 0 ? key_scales_.as<float>() : nullptr};
  ASSIGN_OR_RETURN(const int32_t lora_segments, lora_slots_.BuildSegments(batch));
  if (lora_segments > 0) {
    RETURN_IF_ERROR(cu::CopyToDevice(lora_table_.get(), lora_slots_.table().data(),
                                     lora_slots_.table().size() * sizeof(kernels::LoraSegment), stream_));
  }
  CudaOps ops(stream_, ops_config_,
              {.batch = &batch,
               .arrays = arrays,
               .kv = kv,
               .lora = {.table = lora_table_.as<kernels::LoraSegment>(),
                        .count = lora_segments,
                        .rows = lora_slots_.segment_rows()}},
              attention_);
  ops.Prepare();
  forward_(ops, config_, device_weights_, StepOf(batch, config_), activations_);
  RETURN_IF_ERROR(ops.status());
  const size_t logits_bytes = static_cast<size_t>(batch.num_logits_rows()) * config_.vocab_size * sizeof(float);
  RETURN_IF_ERROR(cu::CopyToHost(logits_host_.get(), activations_.logits, logits_bytes, stream_));
  if (batch.want_hidden) {
    const size_t hidden_bytes = static_cast<size_t>(batch.num_logits_rows()) * config_.hidden_size * sizeof(float);
    RETURN_IF_ERROR(cu::CopyToHost(hidden_host_.get(), activations_.logits_in, hidden_bytes, stream_));
  }
  RETURN_IF_ERROR(cu::CheckLaunches("the forward pass's kernels"));
  RETURN_IF_ERROR(cu::Synchronize(stream_));
  return ForwardOutput{.vocab_size = info_.vocab_size,
                       .num_rows = batch.num_logits_rows(),
                       .logits = logits_host_.as<float>(),
                       .hidden_size = config_.hidden_size,
                       .hidden = batch.want_hidden ? hidden_host_.as<float>() : nullptr};
}

absl::Status CudaExecutor::LoadDraftHeads(std::shared_ptr<const model::DraftHeads> heads) {
  if (heads == nullptr || heads->hidden_size() != config_.hidden_size) {
    return absl::InvalidArgumentError("draft heads of another hidden size than the model's");
  }
  RETURN_IF_ERROR(cu::SetDevice(options_.device.index));
  // One allocation for every head's matrix and bias and the draft rows of
  // the output head, as the model's weights are placed.
  model::DraftHeadWeights placed = heads->weights();
  std::vector<model::WeightView*> views;
  for (model::DraftHeadWeights::Head& h : placed.heads) {
    views.push_back(&h.weight);
    views.push_back(&h.bias);
  }
  views.push_back(&placed.vocab_head);
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const model::WeightView* w : views) {
    offsets.push_back(total);
    total = AlignUp(total + static_cast<size_t>(w->bytes()));
  }
  ASSIGN_OR_RETURN(heads_weights_, cu::DeviceBuffer::Allocate(total));
  for (size_t i = 0; i < views.size(); ++i) {
    uint8_t* at = heads_weights_.as<uint8_t>() + offsets[i];
    RETURN_IF_ERROR(cu::CopyToDevice(at, views[i]->data, static_cast<size_t>(views[i]->bytes()), stream_));
    views[i]->data = at;
  }
  device_heads_ = std::move(placed);
  draft_heads_ = std::move(heads);
  // Room for a step's worth of requests; a larger call grows it.
  RETURN_IF_ERROR(ReserveDraftHeadRows(std::max<int64_t>(1, info_.limits.max_batch_chunks)));
  return cu::Synchronize(stream_);
}

absl::Status CudaExecutor::ReserveDraftHeadRows(int64_t rows) {
  if (rows <= heads_rows_) return absl::OkStatus();
  const int64_t h = device_heads_.hidden_size(), v = device_heads_.vocab_size(), k = draft_heads_->num_heads();
  const size_t floats = static_cast<size_t>(rows * h + k * rows * h + k * rows * v);
  ASSIGN_OR_RETURN(heads_scratch_, cu::DeviceBuffer::Allocate(floats * sizeof(float)));
  ASSIGN_OR_RETURN(heads_logits_host_,
                   cu::PinnedHostBuffer::Allocate(static_cast<size_t>(k * rows * v) * sizeof(float)));
  heads_rows_ = rows;
  return absl::OkStatus();
}

absl::StatusOr<std::span<const float>> CudaExecutor::RunDraftHeads(std::span<const float> hidden, int64_t rows,
                                                                   int32_t num_heads) {
  RETURN_IF_ERROR(CheckDraftHeadsCall(draft_heads_.get(), hidden, rows, num_heads));
  RETURN_IF_ERROR(cu::SetDevice(options_.device.index));
  RETURN_IF_ERROR(ReserveDraftHeadRows(rows));
  const int64_t h = device_heads_.hidden_size(), v = device_heads_.vocab_size();
  float* d_hidden = heads_scratch_.as<float>();
  float* d_states = d_hidden + heads_rows_ * h;
  float* d_logits = d_states + draft_heads_->num_heads() * heads_rows_ * h;
  RETURN_IF_ERROR(cu::CopyToDevice(d_hidden, hidden.data(), hidden.size() * sizeof(float), stream_));
  CudaOps ops(stream_, ops_config_, {}, attention_);
  model::DraftHeadsForward(ops, device_heads_, num_heads, rows, d_hidden, d_states, d_logits);
  RETURN_IF_ERROR(ops.status());
  const size_t logits = static_cast<size_t>(num_heads * rows * v);
  RETURN_IF_ERROR(cu::CopyToHost(heads_logits_host_.get(), d_logits, logits * sizeof(float), stream_));
  RETURN_IF_ERROR(cu::CheckLaunches("the draft heads' kernels"));
  RETURN_IF_ERROR(cu::Synchronize(stream_));
  return std::span<const float>(heads_logits_host_.as<float>(), logits);
}

// A block is one contiguous piece of each layer's K and V: 2 × layers
// copies on the stream into (or out of) one host buffer, then one
// synchronization.
absl::Status CudaExecutor::CopyKvBlockOut(BlockId block, std::span<uint8_t> out) {
  RETURN_IF_ERROR(CheckKvBlockCopy(info_, block, out.size()));
  RETURN_IF_ERROR(cu::SetDevice(options_.device.index));
  const size_t piece = static_cast<size_t>(KvLayoutFor(config_, options_, 1).BytesPerLayer());
  const size_t at = static_cast<size_t>(block.value()) * piece;
  uint8_t* dst = out.data();
  for (size_t l = 0; l < k_layers_.size(); ++l) {
    RETURN_IF_ERROR(cu::CopyToHost(dst, k_layers_[l] + at, piece, stream_));
    RETURN_IF_ERROR(cu::CopyToHost(dst + piece, v_layers_[l] + at, piece, stream_));
    dst += 2 * piece;
  }
  return cu::Synchronize(stream_);
}

absl::Status CudaExecutor::CopyKvBlockIn(BlockId block, std::span<const uint8_t> in) {
  RETURN_IF_ERROR(CheckKvBlockCopy(info_, block, in.size()));
  RETURN_IF_ERROR(cu::SetDevice(options_.device.index));
  const size_t piece = static_cast<size_t>(KvLayoutFor(config_, options_, 1).BytesPerLayer());
  const size_t at = static_cast<size_t>(block.value()) * piece;
  const uint8_t* src = in.data();
  for (size_t l = 0; l < k_layers_.size(); ++l) {
    RETURN_IF_ERROR(cu::CopyToDevice(k_layers_[l] + at, src, piece, stream_));
    RETURN_IF_ERROR(cu::CopyToDevice(v_layers_[l] + at, src + piece, piece, stream_));
    src += 2 * piece;
  }
  // The source may be reused as soon as this returns.
  return cu::Synchronize(stream_);
}

absl::Status CudaExecutor::MoveKvSlots(std::span<const int64_t> from, std::span<const int64_t> to) {
  RETURN_IF_ERROR(CheckKvMoves(info_, from, to));
  if (from.empty()) return absl::OkStatus();
  // Between steps the batch's staging and device arrays are free.
  const size_t bytes = from.size() * 2 * sizeof(int64_t);
  if (bytes > batch_staging_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a KV move of ", from.size(), " slots is more than a step's staging holds"));
  }
  RETURN_IF_ERROR(cu::SetDevice(options_.device.index));
  int64_t* pairs = batch_staging_.as<int64_t>();
  for (size_t i = 0; i < from.size(); ++i) {
    pairs[2 * i] = from[i];
    pairs[2 * i + 1] = to[i];
  }
  RETURN_IF_ERROR(cu::CopyToDevice(batch_device_.get(), pairs, bytes, stream_));
  const kernels::KvCacheLayout layout = KvLayoutFor(config_, options_, KvPagesAllocated(info_, info_.num_blocks));
  const auto* moves = batch_device_.as<int64_t>();
  const int32_t count = static_cast<int32_t>(from.size());
  for (size_t l = 0; l < k_layers_.size(); ++l) {
    kernels::cuda::LaunchMoveKvRows(layout, moves, count, k_layers_[l], stream_);
    kernels::cuda::LaunchMoveKvRows(layout, moves, count, v_layers_[l], stream_);
  }
  RETURN_IF_ERROR(cu::CheckLaunches("the KV move"));
  return cu::Synchronize(stream_);
}

std::shared_ptr<uint8_t> CudaExecutor::AllocateHostMemory(size_t bytes) {
  if (!cu::SetDevice(options_.device.index).ok()) return nullptr;
  absl::StatusOr<void*> p = cu::MallocHost(bytes);
  if (!p.ok()) return nullptr;
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(*p), [](uint8_t* q) { cu::FreeHost(q); });
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
