#include "services/worker/engine/executor/cpu_executor.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/kv_sizing.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/rope.h"

namespace kvfleet::engine {

// Activations of one step, [tokens, width] row-major.
struct CpuExecutor::Scratch {
  int64_t tokens = 0;
  std::vector<int32_t> positions, sequence;
  std::vector<std::vector<int32_t>> tables;
  std::vector<const int32_t*> table_ptrs;
  std::vector<float> x, xn, q, k, v, attn, proj, gate, up;
};

absl::Status CpuExecutorOptions::Validate() const {
  if (num_blocks <= 0) return absl::InvalidArgumentError("num_blocks must be positive");
  if (block_size <= 0 || block_size > 1024) return absl::InvalidArgumentError("block_size must be in [1, 1024]");
  if (num_threads < 0) return absl::InvalidArgumentError("num_threads must be >= 0");
  return absl::OkStatus();
}

absl::StatusOr<CpuExecutorOptions> CpuExecutorOptions::ForMemoryBudget(const model::LlamaHparams& hp,
                                                                       int64_t kv_cache_bytes, int64_t block_size,
                                                                       int num_threads) {
  const KvCachePlan plan =
      PlanKvCache(hp.kv_shape(), sizeof(uint16_t), block_size, kv_cache_bytes, hp.context_length);
  if (plan.num_blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a KV cache of ", kv_cache_bytes, " bytes holds no block of ",
                                                   block_size, " tokens at ", plan.bytes_per_token,
                                                   " bytes per token; give it more memory"));
  }
  KVFLEET_LOG_INFO(
      "KV cache: {} bytes per token (2 x {} layers x {} kv heads x {} x 2 bytes); {} bytes hold {} blocks of {} "
      "tokens = {} tokens, {} full-context ({}-token) sequences",
      plan.bytes_per_token, hp.num_layers, hp.num_kv_heads, hp.head_dim, kv_cache_bytes, plan.num_blocks, block_size,
      plan.tokens, plan.full_context_sequences, hp.context_length);
  CpuExecutorOptions options{.num_blocks = plan.num_blocks, .block_size = block_size, .num_threads = num_threads};
  RETURN_IF_ERROR(options.Validate());
  return options;
}

absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(const model::LlamaModel& model,
                                                                 const CpuExecutorOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<CpuExecutor>(new CpuExecutor(model, options));
}

CpuExecutor::CpuExecutor(const model::LlamaModel& model, const CpuExecutorOptions& options)
    : model_(model), hp_(model.hparams()), options_(options), pool_(options.num_threads) {
  info_.vocab_size = hp_.vocab_size;
  info_.context_length = hp_.context_length;
  info_.block_size = options.block_size;
  info_.num_blocks = options.num_blocks;
  info_.num_layers = hp_.num_layers;
  info_.weight_bytes = model.file().file_size();
  info_.kv_bytes_per_token = KvBytesPerToken(hp_.kv_shape(), sizeof(uint16_t));
  const size_t per_layer = static_cast<size_t>(options.num_blocks * hp_.num_kv_heads * options.block_size *
                                               hp_.head_dim);
  k_cache_.assign(hp_.num_layers, std::vector<uint16_t>(per_layer));
  v_cache_.assign(hp_.num_layers, std::vector<uint16_t>(per_layer));
  const model::WeightView& rf = model.weights().rope_freqs;
  if (rf.present()) rope_freq_factors_.assign(rf.f32(), rf.f32() + rf.cols);
}

absl::Status CpuExecutor::ValidateBatch(const ForwardBatch& batch) const {
  if (batch.num_layers < 0 || batch.num_layers > hp_.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_layers ", batch.num_layers, " is outside [0, ", hp_.num_layers, "]"));
  }
  for (size_t c = 0; c < batch.chunks.size(); ++c) {
    const SequenceChunk& ch = batch.chunks[c];
    const int64_t end = static_cast<int64_t>(ch.start_position) + static_cast<int64_t>(ch.tokens.size());
    if (ch.tokens.empty() || ch.start_position < 0) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", c, " is empty or starts at a negative position"));
    }
    if (end > hp_.context_length) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", c, " reaches position ", end,
                                                     ", past the model's context length ", hp_.context_length));
    }
    const int64_t blocks_needed = (end + options_.block_size - 1) / options_.block_size;
    if (static_cast<int64_t>(ch.block_table.size()) < blocks_needed) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", c, " needs ", blocks_needed,
                                                     " blocks but its block table has ", ch.block_table.size()));
    }
    for (BlockId b : ch.block_table) {
      if (b.value() < 0 || b.value() >= options_.num_blocks) {
        return absl::InvalidArgumentError(absl::StrCat("chunk ", c, " names block ", b.value(),
                                                       " outside the cache of ", options_.num_blocks, " blocks"));
      }
    }
    for (model::TokenId t : ch.tokens) {
      if (t < 0 || t >= hp_.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", t, " is outside the vocabulary [0, ", hp_.vocab_size, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ForwardOutput> CpuExecutor::Forward(const ForwardBatch& batch) {
  RETURN_IF_ERROR(ValidateBatch(batch));
  Scratch s;
  const int64_t hidden = hp_.hidden_size;
  for (size_t c = 0; c < batch.chunks.size(); ++c) {
    const SequenceChunk& ch = batch.chunks[c];
    std::vector<int32_t> table;
    table.reserve(ch.block_table.size());
    for (BlockId b : ch.block_table) table.push_back(b.value());
    s.tables.push_back(std::move(table));
    for (size_t i = 0; i < ch.tokens.size(); ++i) {
      s.positions.push_back(ch.start_position + static_cast<int32_t>(i));
      s.sequence.push_back(static_cast<int32_t>(c));
    }
  }
  for (const auto& t : s.tables) s.table_ptrs.push_back(t.data());
  s.tokens = static_cast<int64_t>(s.positions.size());

  // Embedding: dequantize one row of token_embd per token.
  const model::WeightView& embd = model_.weights().token_embd;
  const int64_t embd_row_bytes = RowBytes(embd.dtype, hidden);
  s.x.resize(s.tokens * hidden);
  int64_t row = 0;
  for (const SequenceChunk& ch : batch.chunks) {
    for (model::TokenId t : ch.tokens) {
      kernels::DequantizeRow(embd.dtype, static_cast<const uint8_t*>(embd.data) + t * embd_row_bytes,
                             s.x.data() + row * hidden, hidden);
      ++row;
    }
  }
  const int64_t layers = batch.num_layers > 0 ? batch.num_layers : hp_.num_layers;
  for (int64_t l = 0; l < layers; ++l) RunLayer(l, s);

  ForwardOutput out;
  ComputeLogits(batch, s, out);
  return out;
}

namespace {

void Project(const model::WeightView& w, const std::vector<float>& x, int64_t tokens, std::vector<float>& y,
             ThreadPool& pool) {
  y.resize(tokens * w.rows);
  kernels::MatMul({.w_type = w.dtype, .w = w.data, .n = w.rows, .k = w.cols, .x = x.data(), .m = tokens,
                   .y = y.data()},
                  pool);
}

}  // namespace

void CpuExecutor::RunLayer(int64_t layer, Scratch& s) {
  const model::LlamaLayerWeights& w = model_.weights().layers[layer];
  const int64_t T = s.tokens, hidden = hp_.hidden_size, hd = hp_.head_dim;
  const float eps = static_cast<float>(hp_.rms_norm_eps);

  s.xn.resize(T * hidden);
  kernels::RmsNorm(s.x.data(), w.attn_norm.f32(), s.xn.data(), T, hidden, eps);
  Project(w.attn_q, s.xn, T, s.q, pool_);
  Project(w.attn_k, s.xn, T, s.k, pool_);
  Project(w.attn_v, s.xn, T, s.v, pool_);
  if (hp_.qkv_bias) {
    kernels::AddBias(s.q.data(), w.attn_q_bias.f32(), T, w.attn_q.rows);
    kernels::AddBias(s.k.data(), w.attn_k_bias.f32(), T, w.attn_k.rows);
    kernels::AddBias(s.v.data(), w.attn_v_bias.f32(), T, w.attn_v.rows);
  }

  const kernels::RopeParams rope{
      .mode = hp_.rope_pairing == model::RopePairing::kAdjacent ? kernels::RopeMode::kAdjacent
                                                                 : kernels::RopeMode::kHalves,
      .head_dim = hd,
      .rot_dim = hp_.rope_dim,
      .theta_base = static_cast<float>(hp_.rope_theta),
      .position_scale = static_cast<float>(1.0 / hp_.rope_scaling_factor),
      .freq_factors = rope_freq_factors_.empty() ? nullptr : rope_freq_factors_.data()};
  kernels::ApplyRope(rope, s.q.data(), s.positions.data(), T, hp_.num_heads);
  kernels::ApplyRope(rope, s.k.data(), s.positions.data(), T, hp_.num_kv_heads);

  const kernels::KvCacheLayout layout{.num_blocks = options_.num_blocks, .num_kv_heads = hp_.num_kv_heads,
                                      .block_size = options_.block_size, .head_dim = hd};
  const kernels::TokenPlacement where{.positions = s.positions.data(), .sequence = s.sequence.data(),
                                      .block_tables = s.table_ptrs.data()};
  kernels::WriteKv(layout, where, s.k.data(), s.v.data(), T, k_cache_[layer].data(), v_cache_[layer].data());

  s.attn.resize(T * hp_.num_heads * hd);
  kernels::PagedAttention({.layout = layout, .where = where, .num_tokens = T, .num_heads = hp_.num_heads,
                           .scale = 1.0f / std::sqrt(static_cast<float>(hd)), .q = s.q.data(),
                           .k_cache = k_cache_[layer].data(), .v_cache = v_cache_[layer].data(),
                           .out = s.attn.data()},
                          pool_);
  Project(w.attn_output, s.attn, T, s.proj, pool_);
  kernels::AddInPlace(s.x.data(), s.proj.data(), T * hidden);

  kernels::RmsNorm(s.x.data(), w.ffn_norm.f32(), s.xn.data(), T, hidden, eps);
  Project(w.ffn_gate, s.xn, T, s.gate, pool_);
  Project(w.ffn_up, s.xn, T, s.up, pool_);
  kernels::SwiGlu(s.gate.data(), s.up.data(), s.gate.data(), T * hp_.ffn_size);
  Project(w.ffn_down, s.gate, T, s.proj, pool_);
  kernels::AddInPlace(s.x.data(), s.proj.data(), T * hidden);
}

void CpuExecutor::ComputeLogits(const ForwardBatch& batch, Scratch& s, ForwardOutput& out) {
  const int64_t hidden = hp_.hidden_size;
  // Gather the rows that want logits, then norm and project only those.
  std::vector<float> rows;
  int64_t token = 0, num_rows = 0;
  for (const SequenceChunk& ch : batch.chunks) {
    out.first_row.push_back(num_rows);
    const int64_t n = static_cast<int64_t>(ch.tokens.size());
    const int64_t first = ch.logits == LogitsWanted::kAll ? 0 : n - 1;
    if (ch.logits != LogitsWanted::kNone) {
      for (int64_t i = first; i < n; ++i) {
        rows.insert(rows.end(), s.x.begin() + (token + i) * hidden, s.x.begin() + (token + i + 1) * hidden);
        ++num_rows;
      }
    }
    token += n;
  }
  out.vocab_size = hp_.vocab_size;
  if (num_rows == 0) return;
  kernels::RmsNorm(rows.data(), model_.weights().output_norm.f32(), rows.data(), num_rows, hidden,
                   static_cast<float>(hp_.rms_norm_eps));
  Project(model_.weights().output, rows, num_rows, out.logits, pool_);
}

}  // namespace kvfleet::engine
