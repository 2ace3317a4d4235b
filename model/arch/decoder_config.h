// The hyperparameters every decoder architecture reads the same way, in
// each format: GGUF's "<arch>.block_count" family of keys and config.json's
// "num_hidden_layers" family. An architecture's ReadConfig starts from one
// of these and adds what is its own (model/arch/README.md).
//
//   ASSIGN_OR_RETURN(ModelConfig c, ReadGgufDecoderConfig(source, "qwen2", RopePairing::kHalves));
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "model/arch/model_config.h"
#include "model/source/model_source.h"

namespace kvfleet::model {

// From "<prefix>.context_length", ".embedding_length", ".feed_forward_length",
// ".block_count", ".attention.head_count[_kv]", ".attention.key_length",
// ".attention.layer_norm_rms_epsilon", ".rope.dimension_count",
// ".rope.freq_base", ".rope.scaling.type" (none or linear) and the
// rope_freqs.weight tensor (Llama 3.1's frequency factors); the vocabulary
// size from token_embd.weight; tied when output.weight is absent. One RoPE
// of `pairing`, every layer full attention, scale 1/√head_dim.
absl::StatusOr<ModelConfig> ReadGgufDecoderConfig(const ModelSource& source, std::string_view prefix,
                                                  RopePairing pairing);

// From config.json: hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings,
// rms_norm_eps, rope_theta, rope_scaling (linear or llama3), vocab_size,
// tie_word_embeddings (`tied_by_default` when absent). RoPE pairs halves,
// as every Hugging Face checkpoint does; full attention; 1/√head_dim.
absl::StatusOr<ModelConfig> ReadHfDecoderConfig(const ModelSource& source, bool tied_by_default);

// Llama 3's RoPE frequency divisors (rope_scaling type "llama3"), as
// llama.cpp's converter writes them into rope_freqs.weight.
std::vector<float> Llama3FrequencyFactors(double theta, int64_t dim, double factor, double low_freq_factor,
                                          double high_freq_factor, double original_context);

}  // namespace kvfleet::model
