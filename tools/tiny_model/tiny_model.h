// Builds small random-weight GGUF files of every architecture kvfleet runs
// (the registry's, model/arch/), of any shape and tensor type, with a small
// but valid byte-level BPE vocabulary and a ChatML chat template. Unit tests
// and reference tests use them where the real models would be too slow or
// too fixed; kvfleet export-hf turns one into a checkpoint of the same model.
//
//   TinyModelOptions o{.dtype = DType::kQ4_1, .seed = 7};
//   RETURN_IF_ERROR(WriteTinyModel(o, "/tmp/tiny.gguf"));
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/dtype.h"
#include "model/arch/decoder_config.h"
#include "model/gguf/gguf_writer.h"

namespace kvfleet::tools {

struct TinyModelOptions {
  // Any architecture of the registry (TinyArchitectureNames()): its config
  // at this shape with its own defaults (Architecture::default_config), its
  // tensors from its specs.
  std::string architecture = "llama";
  DType dtype = DType::kF32;  // of every matrix, embeddings included
  uint64_t seed = 1;
  int64_t num_layers = 2;
  int64_t hidden_size = 64;   // multiple of 32
  int64_t num_heads = 4;
  int64_t num_kv_heads = 2;
  int64_t ffn_size = 128;     // multiple of 32
  int64_t context_length = 256;
  float rope_theta = 10000.0f;
  bool tied_embeddings = false;
  // 0: the tiny vocabulary's own size (TinyVocabSize()). Larger: padded with
  // unused tokens, for the shape of a real model's embeddings and head
  // (SmolLM2's 49,152; Llama 3's 128,256).
  int64_t vocab_size = 0;
  int64_t sliding_window = 8;  // an architecture's windowed layers (gemma3's local ones)
  // llama: Llama 3's scaled RoPE (factor 8, low 1, high 4, original context / 4),
  // written as llama.cpp writes it, a rope_freqs.weight tensor.
  bool llama3_rope = false;

  absl::Status Validate() const;
  model::DecoderShape Shape() const;
};

// The architectures a tiny model can be: "llama, qwen2, ...".
std::string TinyArchitectureNames();

// `o` widened so every matrix's rows are whole blocks of o.dtype: a K-quant
// needs rows of 256 (hidden 256, feed-forward 512, heads × head_dim 256).
TinyModelOptions ShapedForType(TinyModelOptions o);

// Fills a writer (so tests can add, drop or corrupt entries before writing).
absl::Status BuildTinyModel(const TinyModelOptions& options, model::GgufWriter& writer);

absl::Status WriteTinyModel(const TinyModelOptions& options, const std::string& path);

// The number of tokens in the tiny vocabulary (3 specials, 256 bytes, merges).
int64_t TinyVocabSize();

// What a checkpoint of the tiny model states that its GGUF file does not
// (Llama 3's rope_scaling), for export-hf's config extras: a JSON object.
std::string TinyHfConfigExtras(const TinyModelOptions& options);

}  // namespace kvfleet::tools
