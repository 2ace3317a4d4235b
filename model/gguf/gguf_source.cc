#include "model/gguf/gguf_source.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/gguf/gguf_vocabulary.h"

namespace kvfleet::model {
namespace {

// GGUF metadata behind the ConfigReader interface: keys are literal (their
// dots are part of the name).
class GgufConfigReader : public ConfigReader {
 public:
  explicit GgufConfigReader(const GgufFile& file) : file_(file) {}

  const std::string& origin() const override { return file_.path(); }
  bool Has(std::string_view key) const override { return file_.Has(std::string(key)); }
  absl::StatusOr<int64_t> Int(std::string_view key) const override { return file_.GetInt(std::string(key)); }
  absl::StatusOr<double> Float(std::string_view key) const override { return file_.GetFloat(std::string(key)); }
  absl::StatusOr<std::string> String(std::string_view key) const override {
    return file_.GetString(std::string(key));
  }
  absl::StatusOr<bool> Bool(std::string_view key) const override { return file_.GetBool(std::string(key)); }
  absl::StatusOr<std::vector<std::string>> StringList(std::string_view key) const override {
    return file_.GetStringArray(std::string(key));
  }
  absl::StatusOr<std::vector<int64_t>> IntList(std::string_view key) const override {
    return file_.GetIntArray(std::string(key));
  }
  absl::StatusOr<std::vector<float>> FloatList(std::string_view key) const override {
    return file_.GetFloatArray(std::string(key));
  }

 private:
  const GgufFile& file_;
};

}  // namespace

GgufSource::~GgufSource() = default;

absl::StatusOr<std::unique_ptr<GgufSource>> GgufSource::Open(const std::string& path) {
  std::unique_ptr<GgufSource> s(new GgufSource());
  ASSIGN_OR_RETURN(s->file_, GgufFile::Open(path));
  s->config_ = std::make_unique<GgufConfigReader>(*s->file_);
  ASSIGN_OR_RETURN(s->architecture_, s->file_->GetString("general.architecture"));
  if (s->file_->Has("general.name")) {
    ASSIGN_OR_RETURN(s->name_, s->file_->GetString("general.name"));
  } else {
    s->name_ = std::filesystem::path(path).stem().string();
  }
  s->tensors_.reserve(s->file_->tensors().size());
  for (const TensorInfo& t : s->file_->tensors()) {
    std::vector<int64_t> shape(t.shape.rbegin(), t.shape.rend());  // GGUF lists the contiguous dimension first
    s->tensor_index_.emplace(t.name, s->tensors_.size());
    s->tensors_.push_back({.name = t.name,
                           .dtype = t.dtype,
                           .shape = std::move(shape),
                           .data = t.data,
                           .num_elements = t.num_elements,
                           .num_bytes = t.num_bytes});
  }
  s->vocabulary_ = ReadGgufVocabulary(*s->file_);
  if (s->vocabulary_.ok() && s->vocabulary_->eos.has_value()) {
    s->generation_defaults_.eos_token_ids.push_back(*s->vocabulary_->eos);
  }
  return s;
}

const TensorView* GgufSource::FindTensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace kvfleet::model
