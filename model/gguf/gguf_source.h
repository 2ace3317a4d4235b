// A GGUF file as a ModelSource (model/source/model_source.h): its metadata
// behind a ConfigReader (keys as stored, "qwen2.block_count"), its tensors
// with row-major shapes, its vocabulary from tokenizer.ggml.*.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<GgufSource> src, GgufSource::Open("models/x.gguf"));
//   const GgufFile& file = src->file();
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/gguf/gguf_file.h"
#include "model/source/model_source.h"

namespace kvfleet::model {

class GgufSource : public ModelSource {
 public:
  static absl::StatusOr<std::unique_ptr<GgufSource>> Open(const std::string& path);
  ~GgufSource() override;

  const GgufFile& file() const { return *file_; }

  ModelFormat format() const override { return ModelFormat::kGguf; }
  const std::string& path() const override { return file_->path(); }
  const std::string& architecture() const override { return architecture_; }
  const std::string& name() const override { return name_; }
  const ConfigReader& config() const override { return *config_; }
  const std::vector<TensorView>& tensors() const override { return tensors_; }
  const TensorView* FindTensor(std::string_view name) const override;
  int64_t mapped_bytes() const override { return file_->file_size(); }
  std::vector<std::string> weight_files() const override { return {file_->path()}; }
  void DropPages(const void* data, size_t size) const override { file_->DropPages(data, size); }
  const absl::StatusOr<Vocabulary>& vocabulary() const override { return vocabulary_; }
  const GenerationDefaults& generation_defaults() const override { return generation_defaults_; }

 private:
  GgufSource() = default;

  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<ConfigReader> config_;
  std::string architecture_;
  std::string name_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  absl::StatusOr<Vocabulary> vocabulary_ = absl::UnknownError("not read");
  GenerationDefaults generation_defaults_;
};

}  // namespace kvfleet::model
