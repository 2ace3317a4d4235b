// How a model splits across the ranks of one tensor-parallel replica: each
// rank's run of query heads, KV heads, feed-forward columns and vocabulary
// rows. The plan is the contract every other part of tensor parallelism
// reads: the executors cut their weights by it, the memory plan and
// `kvfleet capacity` size each rank's cache by its KV heads, and the
// numerics identity names it.
//
// The rules (Megatron's split, as vLLM and SGLang apply it):
//   - attention: the query heads split in contiguous runs, each rank taking
//     whole groups of the KV head they share. With fewer KV heads than
//     ranks, each KV head is replicated on (degree / KV heads) ranks, which
//     split its group's query heads; the degree must then be a multiple of
//     the KV heads, and each rank gets at least one query head.
//   - feed-forward: gate and up split by rows (columns of the activation),
//     down by its input columns, in the same runs.
//   - the embedding table and output head split by vocabulary rows.
//   - row-parallel splits (attn_output's and ffn_down's input columns) fall
//     on whole quantization blocks of those tensors (256 values for a
//     K-quant, 32 for every other type: what the kernels walk by).
// Shares may be unequal: the most even split that keeps every rule. A
// degree that breaks a rule is refused, naming the tensor, the rule and
// the degrees that work for this model.
//
//   ASSIGN_OR_RETURN(ShardPlan plan, PlanShards(config, 3, ShardAlignmentOf(source.tensors())));
//   plan.ranks[1].q_heads  // rank 1's query heads
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/arch/model_config.h"
#include "model/source/tensor_view.h"

namespace kvfleet::model {

// The values a row-parallel split must fall on, per tensor: the largest
// over the layers (a K-quant mix stores some layers' tensors in another
// type), and at least 32.
struct ShardAlignment {
  int64_t attn_output = 32;               // attn_output's input columns (heads × head_dim)
  int64_t ffn_down = 32;                  // ffn_down's input columns (the feed-forward size)
  std::string attn_output_dtype = "F32";  // for messages: the type that sets it (DTypeName)
  std::string ffn_down_dtype = "F32";
};

// From a model file's tensors: its attn_output and ffn_down tensors by
// their GGUF or Hugging Face names (tensor_spec.h), every layer's.
ShardAlignment ShardAlignmentOf(std::span<const TensorView> tensors);

// One rank's runs: [begin, begin + count) of each dimension.
struct RankShare {
  int64_t q_head_begin = 0, q_heads = 0;
  int64_t kv_head_begin = 0, kv_heads = 0;
  int64_t ffn_begin = 0, ffn_columns = 0;
  int64_t vocab_begin = 0, vocab_rows = 0;
};

struct ShardPlan {
  int32_t degree = 1;
  // Each KV head is held by this many ranks (1: the KV heads are split).
  int32_t kv_replicas = 1;
  std::vector<RankShare> ranks;

  // Whether every rank holds the same share of every dimension.
  bool even() const;
  // The most KV heads a rank holds: what sizes a rank's KV cache.
  int64_t max_kv_heads_per_rank() const;
  // "tp2" for an even split; otherwise with each rank's query heads and
  // feed-forward columns ("tp3[q3,3,3;f1024,1024,768]"): part of the
  // numerics identity, since the sums a split takes depend on its shares.
  std::string Describe() const;
};

// INVALID_ARGUMENT for a degree below 1, and for one that breaks a rule
// above, naming the tensor, the rule and DegreesThatSplit up to 64.
absl::StatusOr<ShardPlan> PlanShards(const ModelConfig& config, int32_t degree, const ShardAlignment& alignment);

// The degrees in [1, max_degree] PlanShards accepts for this model.
std::vector<int32_t> DegreesThatSplit(const ModelConfig& config, const ShardAlignment& alignment,
                                      int32_t max_degree = 64);

}  // namespace kvfleet::model
