// A model file read into one format-neutral shape: what the architecture
// registry, the executors and the router take, whatever the file was.
//
// A source holds the hyperparameters as stored (a ConfigReader the
// architecture parses into a typed ModelConfig), the named tensors (views
// into the file's mapping), the vocabulary (tokens, merges, specials, chat
// template) and the generation defaults. Two formats produce one:
//   GGUF (model/gguf/gguf_source.h)                 one .gguf file
//   Hugging Face (model/hf/hf_source.h)             a checkpoint directory: config.json,
//                                                    *.safetensors (sharded with an index),
//                                                    tokenizer.json, tokenizer_config.json,
//                                                    generation_config.json
// A bare config.json is a source too, without tensors or vocabulary: enough
// for the capacity planner.
//
// Thread-safety: immutable after it is opened; safe to share for reading.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<ModelSource> src, OpenModelSource("models/x.gguf"));
//   const TensorView* t = src->FindTensor("token_embd.weight");
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/source/config_reader.h"
#include "model/source/generation_defaults.h"
#include "model/source/tensor_view.h"
#include "model/vocabulary.h"

namespace kvfleet::model {

enum class ModelFormat { kGguf, kHuggingFace };

constexpr const char* ModelFormatName(ModelFormat f) { return f == ModelFormat::kGguf ? "GGUF" : "Hugging Face"; }

class ModelSource {
 public:
  virtual ~ModelSource() = default;

  virtual ModelFormat format() const = 0;
  // The file or directory it was opened from.
  virtual const std::string& path() const = 0;
  // The architecture as the format names it: GGUF general.architecture
  // ("qwen2"), or config.json's architectures[0] ("Qwen2ForCausalLM").
  virtual const std::string& architecture() const = 0;
  // The model's display name (general.name, or the directory's name).
  virtual const std::string& name() const = 0;
  virtual const ConfigReader& config() const = 0;

  // Every tensor, in file order (empty for a bare config.json).
  virtual const std::vector<TensorView>& tensors() const = 0;
  // nullptr when absent.
  virtual const TensorView* FindTensor(std::string_view name) const = 0;
  // Bytes of the mapped model files: what loading the weights maps.
  virtual int64_t mapped_bytes() const = 0;
  // The files the tensors' bytes are read from (a GGUF file; a checkpoint's
  // safetensors shards), in the order they were opened.
  virtual std::vector<std::string> weight_files() const = 0;
  // Drops the mapping's pages of [data, data + size): for bytes a backend
  // has copied into its own layout (MappedFile::DropPages).
  virtual void DropPages(const void* data, size_t size) const = 0;

  // The tokenizer's inputs and chat template; a bare config.json has none
  // (FailedPrecondition).
  virtual const absl::StatusOr<Vocabulary>& vocabulary() const = 0;
  virtual const GenerationDefaults& generation_defaults() const = 0;
};

}  // namespace kvfleet::model
