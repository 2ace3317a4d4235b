#include "model/model.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/arch/architecture_registry.h"
#include "model/arch/shard_weights.h"
#include "model/gguf/gguf_source.h"
#include "model/hf/hf_source.h"

namespace kvfleet::model {

absl::StatusOr<std::unique_ptr<ModelSource>> OpenModelSource(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path,
                                            ": no such file or directory (give a .gguf file, a Hugging Face "
                                            "checkpoint directory, or its config.json)"));
  }
  if (std::filesystem::is_directory(path, ec)) {
    ASSIGN_OR_RETURN(std::unique_ptr<HfSource> hf, HfSource::Open(path));
    return std::unique_ptr<ModelSource>(std::move(hf));
  }
  if (std::filesystem::path(path).extension() == ".json") {
    ASSIGN_OR_RETURN(std::unique_ptr<HfSource> config, HfSource::OpenConfig(path));
    return std::unique_ptr<ModelSource>(std::move(config));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GgufSource> gguf, GgufSource::Open(path));
  return std::unique_ptr<ModelSource>(std::move(gguf));
}

std::string DefaultModelId(std::string_view path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();  // "ckpt/qwen-ft/": the directory's name
  std::error_code ec;
  return std::filesystem::is_directory(p, ec) ? p.filename().string() : p.stem().string();
}

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path, LoadOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelSource> source, OpenModelSource(path));
  return FromSource(std::move(source), options);
}

absl::StatusOr<std::unique_ptr<Model>> Model::FromSource(std::unique_ptr<ModelSource> source, LoadOptions options) {
  std::unique_ptr<Model> m(new Model());
  m->source_ = std::shared_ptr<ModelSource>(std::move(source));
  const ModelSource& s = *m->source_;
  ASSIGN_OR_RETURN(const Architecture* arch, FindArchitecture(s));
  ASSIGN_OR_RETURN(m->config_, ReadModelConfig(s));
  if (options.weights) {
    TensorBinder binder(s, m->storage_);
    ASSIGN_OR_RETURN(m->weights_, BindWeights(*arch, binder, m->config_));
  }
  if (options.vocabulary) {
    if (!s.vocabulary().ok()) return s.vocabulary().status();
    m->vocabulary_ = *s.vocabulary();
    if (m->vocabulary_.size() != m->config_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(s.path(), ": the vocabulary has ", m->vocabulary_.size(),
                                                     " tokens but the model's embedding table has ",
                                                     m->config_.vocab_size, " rows"));
    }
  }
  return m;
}

absl::StatusOr<std::unique_ptr<Model>> Model::Shard(const ShardPlan& plan, int32_t rank) const {
  if (rank < 0 || rank >= plan.degree || static_cast<size_t>(plan.degree) != plan.ranks.size()) {
    return absl::InvalidArgumentError(absl::StrCat("no rank ", rank, " in a tensor-parallel plan of ", plan.degree));
  }
  const RankShare& share = plan.ranks[static_cast<size_t>(rank)];
  std::unique_ptr<Model> m(new Model());
  m->source_ = source_;
  m->config_ = ShardConfig(config_, share);
  ASSIGN_OR_RETURN(m->weights_, ShardWeights(weights_, config_, share, m->shard_storage_));
  m->shard_bytes_ = ShardWeightBytes(m->weights_);
  return m;
}

}  // namespace kvfleet::model
