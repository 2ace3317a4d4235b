// The typed hyperparameters of a decoder-only transformer, as an
// architecture's parser fills them from GGUF metadata or config.json: what
// the layer sequences, the executors, the memory plan and the capacity
// planner read. Nothing here names a file format.
//
// Per-layer attention: layers[l].window is 0 (every earlier key) or w > 0
// (key k is visible to query q iff q − k < w: a sliding window), and
// layers[l].rope picks one of `ropes` (Gemma 3 rotates its local layers
// with base 10,000 and its global ones with 1e6).
//
//   ASSIGN_OR_RETURN(ModelConfig c, ReadModelConfig(source));
//   int64_t kv_bytes = KvBytesPerToken(c.kv_shape(), 2);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/kv_sizing.h"

namespace kvfleet::model {

// Which values of a head rotate together. GGUF Llama files were permuted by
// their converter for kAdjacent (x[2i], x[2i+1]); Hugging Face checkpoints,
// and every GGUF of Qwen2, Qwen3 and Gemma 3, pair halves (x[i], x[i + d/2]).
enum class RopePairing { kAdjacent, kHalves };

struct RopeConfig {
  double theta = 10000.0;
  int64_t dim = 0;                 // rotated values per head (≤ head_dim, even)
  RopePairing pairing = RopePairing::kAdjacent;
  double position_scale = 1.0;     // linear scaling: positions × 1 / factor
  std::vector<float> freq_factors; // empty, or [dim / 2] divisors of each pair's frequency (Llama 3)
  // LongRoPE (Phi-3): a second set of divisors for a context longer than
  // the one the model was trained at. Which set rotates is chosen once, by
  // the context an executor serves (FactorsFor), never per step: a choice
  // by sequence length would rotate the same token differently alone and
  // batched.
  std::vector<float> long_freq_factors;  // empty, or [dim / 2]
  int64_t long_factors_above = 0;        // the trained context: long factors serve a longer one
  double magnitude = 1.0;                // cos and sin × this (LongRoPE's and YaRN's attention factor)

  // The divisors that rotate when `context` tokens are served.
  const std::vector<float>& FactorsFor(int64_t context) const {
    return !long_freq_factors.empty() && context > long_factors_above ? long_freq_factors : freq_factors;
  }
};

struct LayerAttention {
  int64_t window = 0;  // 0: full causal attention
  int32_t rope = 0;    // index into ModelConfig::ropes
};

struct ModelConfig {
  std::string architecture;  // the registry's name: "llama", "qwen2", "qwen3", "gemma3"
  std::string name;          // for display
  int64_t vocab_size = 0;
  int64_t context_length = 0;
  int64_t hidden_size = 0;
  int64_t ffn_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-5;
  float attention_scale = 0.0f;   // scores = q·k × this; 1/√head_dim unless the model says otherwise
  float embedding_scale = 1.0f;   // the embedding rows are multiplied by this (Gemma: √hidden)
  bool tied_embeddings = false;   // the output head is the embedding table
  std::vector<RopeConfig> ropes;  // at least one
  std::vector<LayerAttention> layers;  // [num_layers]

  KvShape kv_shape() const { return {num_layers, num_kv_heads, head_dim}; }
  // The largest window of any layer, 0 when every layer attends to all keys.
  int64_t max_window() const;
  // Layers with a window (whose out-of-window blocks could be freed).
  int64_t windowed_layers() const;

  // Everything the kernels rely on: positive sizes, heads a multiple of KV
  // heads, head_dim a multiple of 8, ropes and layers consistent. Errors
  // name the field and `origin` (the file).
  absl::Status Validate(const std::string& origin) const;
};

}  // namespace kvfleet::model
