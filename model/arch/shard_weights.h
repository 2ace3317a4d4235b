// One tensor-parallel rank's config and weights, cut from the whole
// model's by its share (shard_plan.h). The layer sequences then run on the
// rank unchanged: its config says how many heads and feed-forward columns
// it has, its weights hold exactly those.
//
// Column-parallel matrices (Wq, Wk, Wv, gate, up) and the vocabulary's
// rows (the embedding table, the output head) are runs of whole rows:
// views into the whole model's memory. Row-parallel matrices (Wo, Wdown)
// lose columns of every row: copies, each row's run of whole quantization
// blocks (the plan put every split on a block boundary).
//
//   ModelConfig rank_config = ShardConfig(config, plan.ranks[r]);
//   ASSIGN_OR_RETURN(DecoderWeights rank_weights, ShardWeights(weights, config, plan.ranks[r], copies));
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/arch/decoder_weights.h"
#include "model/arch/model_config.h"
#include "model/arch/shard_plan.h"

namespace kvfleet::model {

// The rank's heads and feed-forward width; everything else (the hidden
// size, the vocabulary size, the layers' windows and RoPE) as the model's.
ModelConfig ShardConfig(const ModelConfig& config, const RankShare& share);

// Where ShardWeights keeps its copies: they must live as long as the views.
using ShardStorage = std::vector<std::unique_ptr<uint8_t[]>>;

// The rank's weights. A query or key norm over the whole projection (OLMo
// 2) keeps the rank's heads' values, for the layer sequence's norm across
// ranks. INVALID_ARGUMENT when a tensor cannot be cut on the share's
// boundaries (not whole blocks).
absl::StatusOr<DecoderWeights> ShardWeights(const DecoderWeights& weights, const ModelConfig& config,
                                            const RankShare& share, ShardStorage& copies);

// The bytes a rank's weights occupy (a tied head counted once).
int64_t ShardWeightBytes(const DecoderWeights& weights);

}  // namespace kvfleet::model
