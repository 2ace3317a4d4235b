// Hyperparameters of a Llama-family decoder (Llama 2/3, SmolLM2, Mistral,
// Qwen2) read from GGUF metadata, validated once so the executor can trust
// them.
//
//   ASSIGN_OR_RETURN(LlamaHparams hp, ReadLlamaHparams(*gguf));
//   int64_t kv_bytes = KvBytesPerToken(hp.kv_shape(), 2);
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/kv_sizing.h"
#include "model/gguf/gguf_file.h"

namespace kvfleet::model {

enum class RopeScaling { kNone, kLinear, kLlama3 };
enum class RopePairing { kAdjacent, kHalves };

struct LlamaHparams {
  std::string architecture;   // "llama" or "qwen2"
  std::string name;           // general.name, for display
  int64_t vocab_size = 0;
  int64_t context_length = 0;
  int64_t hidden_size = 0;
  int64_t ffn_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling = RopeScaling::kNone;
  double rope_scaling_factor = 1.0;
  RopePairing rope_pairing = RopePairing::kAdjacent;
  double rms_norm_eps = 1e-5;
  bool tied_embeddings = false;    // no output.weight: the head reuses token_embd
  bool qkv_bias = false;           // Qwen2

  KvShape kv_shape() const { return {num_layers, num_kv_heads, head_dim}; }
};

// Errors name the file and the metadata key, or say which architecture is
// unsupported and which ones are.
absl::StatusOr<LlamaHparams> ReadLlamaHparams(const GgufFile& file);

}  // namespace kvfleet::model
