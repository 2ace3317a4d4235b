// A tensor-parallel rank's share of a LoRA adapter, cut as the weights it
// changes are (model/arch/shard_weights.h): for a column-parallel
// projection (q, k, v, gate, up) the rank's rows of B, A whole; for a
// row-parallel one (the attention output, down) the rank's columns of A,
// B whole. Each rank's B·(A·x) is then its part of the product, and the
// all-reduce after the row-parallel products adds the parts as it adds the
// base's.
//
//   LoraAdapter share = ShardLoraAdapter(adapter, config, plan.ranks[r]);
#pragma once

#include "model/arch/model_config.h"
#include "model/arch/shard_plan.h"
#include "model/lora/lora_adapter.h"

namespace kvfleet::model {

// `config` is the whole model's (its head_dim places the head runs).
LoraAdapter ShardLoraAdapter(const LoraAdapter& adapter, const ModelConfig& config, const RankShare& share);

}  // namespace kvfleet::model
