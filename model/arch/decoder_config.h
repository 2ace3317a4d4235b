// The hyperparameters every decoder architecture reads the same way, in
// each format: GGUF's "<arch>.block_count" family of keys and config.json's
// "num_hidden_layers" family. An architecture's ReadConfig starts from one
// of these and adds what is its own (model/arch/README.md).
//
// The writers are the readers' inverses (the tiny models' GGUF metadata, a
// checkpoint export's config.json), and DecoderConfigOf is what a shape
// gives before an architecture adds its own defaults.
//
//   ASSIGN_OR_RETURN(ModelConfig c, ReadGgufDecoderConfig(source, "qwen2", RopePairing::kHalves, 12));
//   WriteHfDecoderConfig(c, writer);
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/arch/model_config.h"
#include "model/source/config_writer.h"
#include "model/source/model_source.h"

namespace kvfleet::model {

// A decoder's size, from which an architecture makes its config with its
// own defaults (Architecture::default_config): what the tiny models and
// the tests build.
struct DecoderShape {
  int64_t vocab_size = 0;
  int64_t context_length = 0;
  int64_t hidden_size = 0;
  int64_t ffn_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  double rope_theta = 10000.0;  // for an architecture that takes one base
  int64_t sliding_window = 0;   // for an architecture with windowed layers
  bool tied_embeddings = false;
  bool llama3_rope = false;  // Llama 3's scaled RoPE (llama only)
};

// What every decoder has at `shape`: head_dim = hidden / heads, scores ×
// 1/√head_dim, RMSNorm ε 1e-5, one RoPE of `shape.rope_theta` over the
// whole head paired as `pairing`, every layer full attention.
ModelConfig DecoderConfigOf(std::string_view architecture, const DecoderShape& shape, RopePairing pairing);

// From "<prefix>.context_length", ".embedding_length", ".feed_forward_length",
// ".block_count", ".attention.head_count[_kv]", ".attention.key_length",
// ".attention.layer_norm_rms_epsilon", ".rope.dimension_count",
// ".rope.freq_base", ".rope.scaling.type" (none or linear) and the
// rope_freqs.weight tensor (Llama 3.1's frequency factors); the vocabulary
// size from token_embd.weight; tied when output.weight is absent. One RoPE
// of `pairing`, every layer full attention, scale 1/√head_dim. A
// block_count the file could not hold at `tensors_per_layer` (the
// architecture's) is refused before anything is sized by it.
absl::StatusOr<ModelConfig> ReadGgufDecoderConfig(const ModelSource& source, std::string_view prefix,
                                                  RopePairing pairing, int64_t tensors_per_layer);
// The keys ReadGgufDecoderConfig reads, "<prefix>." first, and Llama 3's
// frequency factors as the tensor rope_freqs.weight.
void WriteGgufDecoderConfig(const ModelConfig& c, std::string_view prefix, ConfigWriter& w);

// From config.json: hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings,
// rms_norm_eps, rope_theta, rope_scaling (linear or llama3), vocab_size,
// tie_word_embeddings (`tied_by_default` when absent). RoPE pairs halves,
// as every Hugging Face checkpoint does; full attention; 1/√head_dim. An
// architecture with a scaling of its own (Phi-3's LongRoPE) reads
// rope_scaling itself (`rope_scaling_is_callers`).
absl::StatusOr<ModelConfig> ReadHfDecoderConfig(const ModelSource& source, bool tied_by_default,
                                                bool rope_scaling_is_callers = false);
// The keys ReadHfDecoderConfig reads (Llama 3's rope_scaling is not derived
// back from its factors: a caller that has it states it).
void WriteHfDecoderConfig(const ModelConfig& c, ConfigWriter& w);

// The divisors of a GGUF frequency-factor tensor (rope_freqs.weight,
// Phi-3's rope_factors_long.weight): float32 [dim / 2], or an error naming it.
absl::StatusOr<std::vector<float>> ReadFrequencyFactors(const ModelSource& source, const TensorView& tensor,
                                                        int64_t dim);

// Llama 3's RoPE frequency divisors (rope_scaling type "llama3"), as
// llama.cpp's converter writes them into rope_freqs.weight.
std::vector<float> Llama3FrequencyFactors(double theta, int64_t dim, double factor, double low_freq_factor,
                                          double high_freq_factor, double original_context);

}  // namespace kvfleet::model
