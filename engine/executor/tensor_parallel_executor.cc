#include "engine/executor/tensor_parallel_executor.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/executor/backend_common.h"
#include "model/lora/shard_lora_adapter.h"

namespace kvfleet::engine {

absl::StatusOr<std::unique_ptr<TensorParallelExecutor>> TensorParallelExecutor::Create(
    const model::Model& model, const ExecutorOptions& options, std::unique_ptr<RankBackend> backend) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(model::ShardPlan plan, model::PlanShards(model.config(), options.tensor_parallel,
                                                            model::ShardAlignmentOf(model.source().tensors())));
  std::unique_ptr<TensorParallelExecutor> tp(new TensorParallelExecutor(std::move(plan), std::move(backend)));
  tp->injected_ = options.rank_fault;
  tp->whole_config_ = &model.config();
  for (int32_t r = 0; r < tp->plan_.degree; ++r) {
    auto shard = model.Shard(tp->plan_, r);
    if (!shard.ok()) return shard.status();
    ExecutorOptions rank_options = options;
    rank_options.num_blocks = 0;  // allocated below, once every rank exists
    if (options.key_channel_scales != nullptr) {
      const model::RankShare& share = tp->plan_.ranks[static_cast<size_t>(r)];
      rank_options.key_channel_scales = std::make_shared<const KeyChannelScales>(
          options.key_channel_scales->ForKvHeads(share.kv_head_begin, share.kv_heads));
    }
    Collective* own = tp->backend_->OwnCollective(r);
    tp->take_turns_ = own == nullptr;
    Collective& collective = own != nullptr ? *own : tp->group_.rank(r);
    tp->collectives_.push_back(&collective);
    auto rank = tp->backend_->CreateRank(**shard, rank_options, r, collective);
    if (!rank.ok()) {
      return absl::Status(rank.status().code(), absl::StrCat("tensor-parallel rank ", r, " of ", tp->plan_.degree, ": ",
                                                             rank.status().message()));
    }
    tp->shards_.push_back(*std::move(shard));
    tp->ranks_.push_back(*std::move(rank));
  }
  // One executor to the engine: the ranks' shape, their caches' bytes summed.
  ExecutorInfo& info = tp->info_;
  info = tp->ranks_[0]->info();
  info.numerics = tp->backend_->Numerics(options) + "+" + tp->plan_.Describe();
  info.tensor_parallel = tp->plan_.degree;
  info.weight_bytes = info.kv_bytes_per_token = info.kv_block_bytes = 0;
  for (const auto& rank : tp->ranks_) {
    info.weight_bytes += rank->info().weight_bytes;
    info.kv_bytes_per_token += rank->info().kv_bytes_per_token;
    info.kv_block_bytes += rank->info().kv_block_bytes;
  }
  tp->outputs_.assign(tp->ranks_.size(), absl::UnknownError("rank did not run"));
  if (options.num_blocks > 0) RETURN_IF_ERROR(tp->AllocateKvCache(options.num_blocks));
  return tp;
}

TensorParallelExecutor::TensorParallelExecutor(model::ShardPlan plan, std::unique_ptr<RankBackend> backend)
    : plan_(std::move(plan)), backend_(std::move(backend)), group_(plan_.degree), threads_(plan_.degree) {}

TensorParallelExecutor::~TensorParallelExecutor() = default;

ExecutorMemory TensorParallelExecutor::memory() const {
  ExecutorMemory total;
  for (const auto& rank : ranks_) {
    const ExecutorMemory m = rank->memory();
    total.weight_bytes += m.weight_bytes;
    total.scratch_bytes += m.scratch_bytes;
    total.kv_cache_bytes += m.kv_cache_bytes;
    total.resident_bytes += m.resident_bytes;
    total.lora_bytes += m.lora_bytes;
  }
  return total;
}

absl::StatusOr<DeviceFreeMemory> TensorParallelExecutor::FreeMemory() const {
  if (backend_->RanksShareMemory()) return ranks_[0]->FreeMemory();
  double blocks = -1;  // how many whole blocks the tightest device holds
  bool excludes_own = true;
  for (const auto& rank : ranks_) {
    ASSIGN_OR_RETURN(const DeviceFreeMemory free, rank->FreeMemory());
    excludes_own = excludes_own && free.excludes_own_allocations;
    const double fits = static_cast<double>(free.free_bytes) / static_cast<double>(rank->info().kv_block_bytes);
    blocks = blocks < 0 ? fits : std::min(blocks, fits);
  }
  return DeviceFreeMemory{.free_bytes = static_cast<int64_t>(blocks * static_cast<double>(info_.kv_block_bytes)),
                          .excludes_own_allocations = excludes_own};
}

absl::Status TensorParallelExecutor::AllocateKvCache(int64_t num_blocks) {
  for (size_t r = 0; r < ranks_.size(); ++r) {
    absl::Status allocated = ranks_[r]->AllocateKvCache(num_blocks);
    if (!allocated.ok()) {
      return absl::Status(allocated.code(), absl::StrCat("tensor-parallel rank ", r, ": ", allocated.message()));
    }
  }
  info_.num_blocks = num_blocks;
  return absl::OkStatus();
}

absl::Status TensorParallelExecutor::Fault() const {
  std::lock_guard<std::mutex> lock(fault_mu_);
  return fault_;
}

absl::StatusOr<ForwardOutput> TensorParallelExecutor::Forward(const ForwardBatch& batch) {
  RETURN_IF_ERROR(Fault());
  // A batch the ranks would refuse is refused here, alike for all, before
  // any rank starts: past this point a rank's failure is the rank's.
  if (info_.num_blocks == 0) return absl::FailedPreconditionError("Forward before AllocateKvCache");
  RETURN_IF_ERROR(batch.Validate(info_.vocab_size, info_.context_length, KvPagesAllocated(info_, info_.num_blocks),
                                 info_.num_layers, info_.kv_groups.num_groups()));
  RETURN_IF_ERROR(CheckBatchLimits(batch, info_.limits));
  ++steps_;
  threads_.Run([&](int32_t r) {
    if (take_turns_) group_.BeginTurn(r);
    absl::StatusOr<ForwardOutput>& out = outputs_[static_cast<size_t>(r)];
    if (r == injected_.rank && steps_ == injected_.at_step) {
      out = absl::InternalError("a fault injected by --fault-tensor-parallel-rank");
    } else {
      out = ranks_[static_cast<size_t>(r)]->Forward(batch);
    }
    if (const absl::Status met = collectives_[static_cast<size_t>(r)]->status(); out.ok() && !met.ok()) out = met;
    // The others must not wait for this rank at the next collective.
    if (!out.ok()) {
      for (Collective* c : collectives_) c->Abort();
    }
    if (take_turns_) group_.EndTurn(r);
  });
  for (size_t r = 0; r < outputs_.size(); ++r) {
    if (!outputs_[r].ok()) {
      std::lock_guard<std::mutex> lock(fault_mu_);
      fault_ = absl::InternalError(absl::StrCat("tensor-parallel rank ", r, " of ", plan_.degree, " failed mid-step (",
                                                outputs_[r].status().message(),
                                                "); its ranks' KV caches no longer agree, so this replica can run "
                                                "no further step: restart the worker"));
      return fault_;
    }
  }
  // The logits were gathered and the hidden rows summed on every rank.
  return std::move(outputs_[0]);
}

size_t TensorParallelExecutor::PieceOffset(int32_t rank) const {
  size_t offset = 0;
  for (int32_t r = 0; r < rank; ++r)
    offset += static_cast<size_t>(ranks_[static_cast<size_t>(r)]->info().kv_block_bytes);
  return offset;
}

absl::Status TensorParallelExecutor::CopyKvBlockOut(BlockId block, std::span<uint8_t> out) {
  RETURN_IF_ERROR(CheckKvBlockCopy(info_, block, out.size()));
  for (int32_t r = 0; r < plan_.degree; ++r) {
    ModelExecutor& rank = *ranks_[static_cast<size_t>(r)];
    RETURN_IF_ERROR(
        rank.CopyKvBlockOut(block, out.subspan(PieceOffset(r), static_cast<size_t>(rank.info().kv_block_bytes))));
  }
  return absl::OkStatus();
}

absl::Status TensorParallelExecutor::CopyKvBlockIn(BlockId block, std::span<const uint8_t> in) {
  RETURN_IF_ERROR(CheckKvBlockCopy(info_, block, in.size()));
  for (int32_t r = 0; r < plan_.degree; ++r) {
    ModelExecutor& rank = *ranks_[static_cast<size_t>(r)];
    RETURN_IF_ERROR(
        rank.CopyKvBlockIn(block, in.subspan(PieceOffset(r), static_cast<size_t>(rank.info().kv_block_bytes))));
  }
  return absl::OkStatus();
}

absl::Status TensorParallelExecutor::MoveKvSlots(std::span<const int64_t> from, std::span<const int64_t> to) {
  for (const auto& rank : ranks_) RETURN_IF_ERROR(rank->MoveKvSlots(from, to));
  return absl::OkStatus();
}

absl::Status TensorParallelExecutor::LoadDraftHeads(std::shared_ptr<const model::DraftHeads> heads) {
  return ranks_[0]->LoadDraftHeads(std::move(heads));
}

absl::Status TensorParallelExecutor::LoadLora(int32_t slot, std::shared_ptr<const model::LoraAdapter> adapter) {
  for (size_t r = 0; r < ranks_.size(); ++r) {
    auto share =
        std::make_shared<const model::LoraAdapter>(model::ShardLoraAdapter(*adapter, *whole_config_, plan_.ranks[r]));
    if (absl::Status s = ranks_[r]->LoadLora(slot, std::move(share)); !s.ok()) {
      // No rank keeps a share the others lack.
      for (size_t q = 0; q < r; ++q) (void)ranks_[q]->UnloadLora(slot);
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status TensorParallelExecutor::UnloadLora(int32_t slot) {
  for (const auto& rank : ranks_) RETURN_IF_ERROR(rank->UnloadLora(slot));
  return absl::OkStatus();
}

absl::StatusOr<std::span<const float>> TensorParallelExecutor::RunDraftHeads(std::span<const float> hidden,
                                                                             int64_t rows, int32_t num_heads) {
  return ranks_[0]->RunDraftHeads(hidden, rows, num_heads);
}

}  // namespace kvfleet::engine
