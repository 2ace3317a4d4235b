// A Hugging Face checkpoint directory as a ModelSource
// (model/source/model_source.h):
//   config.json                      the architecture (architectures[0]) and its hyperparameters
//   model.safetensors, or
//   model.safetensors.index.json     the weights, one file or shards the index's weight_map names
//   + model-0000N-of-0000M.safetensors
//   tokenizer.json, tokenizer_config.json (chat_template.jinja)   the vocabulary (hf_vocabulary.h)
//   generation_config.json           end-of-sequence ids and sampling defaults (optional)
// A bare config.json is a source too, without tensors or vocabulary, for the
// capacity planner.
//
// Every file is checked when opened: a shard the index names but that is
// missing, a tensor the index places in a shard that does not hold it, a
// tensor in two shards, a malformed config or tokenizer, each fails naming
// the file, the field and what to do.
//
// Thread-safety: immutable after Open.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<HfSource> src, HfSource::Open("checkpoints/qwen/"));
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/hf/json_config_reader.h"
#include "model/hf/safetensors_file.h"
#include "model/source/model_source.h"

namespace kvfleet::model {

class HfSource : public ModelSource {
 public:
  // A checkpoint directory.
  static absl::StatusOr<std::unique_ptr<HfSource>> Open(const std::string& dir);
  // A config.json alone: the hyperparameters, no tensors and no vocabulary.
  static absl::StatusOr<std::unique_ptr<HfSource>> OpenConfig(const std::string& config_json);
  ~HfSource() override;

  ModelFormat format() const override { return ModelFormat::kHuggingFace; }
  const std::string& path() const override { return path_; }
  const std::string& architecture() const override { return architecture_; }
  const std::string& name() const override { return name_; }
  const ConfigReader& config() const override { return *config_; }
  const std::vector<TensorView>& tensors() const override { return tensors_; }
  const TensorView* FindTensor(std::string_view name) const override;
  int64_t mapped_bytes() const override;
  std::vector<std::string> weight_files() const override;
  void DropPages(const void* data, size_t size) const override;
  const absl::StatusOr<Vocabulary>& vocabulary() const override { return vocabulary_; }
  const GenerationDefaults& generation_defaults() const override { return generation_defaults_; }

 private:
  HfSource() = default;
  absl::Status ReadConfig(const std::string& config_json);
  absl::Status OpenWeights();
  absl::Status AddShard(const std::string& file, const std::map<std::string, std::string>* weight_map);
  absl::Status ReadGenerationConfig();

  std::string path_;
  std::string architecture_;
  std::string name_;
  std::unique_ptr<JsonConfigReader> config_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  absl::StatusOr<Vocabulary> vocabulary_ = absl::FailedPreconditionError("a bare config.json has no vocabulary");
  GenerationDefaults generation_defaults_;
};

}  // namespace kvfleet::model
